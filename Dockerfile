# The image deploy/kubernetes/ runs: `docker build -t ghcr.io/nightowl/nightowl:0.1.0 .`
#
# nvidia-smi is deliberately not in the image: it must match the host's kernel driver, so the NVIDIA
# container toolkit mounts the host's copy into the container (runtimeClassName: nvidia,
# NVIDIA_DRIVER_CAPABILITIES=utility; docs.nvidia.com/datacenter/cloud-native/container-toolkit/).
# journalctl (package systemd) reads the host journal mounted at /var/log/journal; dmesg (util-linux)
# reads /dev/kmsg; curl pushes a sweep's textfile to a Pushgateway. SSH is paramiko (no ssh client).

FROM python:3.12-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY nightowl ./nightowl
COPY runbooks ./runbooks
COPY templates ./templates
COPY fixtures ./fixtures
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

FROM python:3.12-slim-bookworm
RUN apt-get update \
    && apt-get install -y --no-install-recommends systemd=252.* curl=7.88.* \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --system --uid 65532 --user-group --no-create-home nightowl
# The DaemonSet runs as root (the journal is root-only) with every capability dropped but SYSLOG;
# the sweep CronJob runs as this user.
USER 65532
ENTRYPOINT ["nightowl"]
CMD ["--help"]
