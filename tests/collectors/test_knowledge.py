"""The data files of nightowl/knowledge agree with themselves, with the code that reads them, and
with the contract's verdict actions; scripts/gen-xid-catalog rebuilds the Xid file from a catalog."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from types import ModuleType

import pytest

from nightowl import knowledge
from nightowl.collectors.gpu import sku_profiles
from nightowl.collectors.gpu import xid_catalog as xc
from nightowl.collectors.nccl import nccl_tests
from nightowl.collectors.serving import engine_log, metrics
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[2]
# Verdict actions of the contract (docs/reference.md), which the runbooks end in.
VERDICT_ACTIONS = set(xc.ACTION_ORDER)
FIXTURE = ROOT / "fixtures" / "knowledge" / "xid-catalog-sample.csv"
NCCL_CORPUS = ROOT / "fixtures" / "corpus" / "nccl"


def _csv(name: str) -> list[dict[str, str]]:
    return knowledge.read_csv(name)


# --- every row has a source -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["xid_catalog.csv", "xid_buckets.csv", "metric_aliases.csv", "busbw_profiles.csv"])
def test_every_csv_row_has_a_source(name: str) -> None:
    rows = _csv(name)
    assert rows
    assert all(row["source"] for row in rows)


def test_every_yaml_entry_has_a_source() -> None:
    assert all(profile.source for profile in sku_profiles.profiles())
    tables = engine_log.tables()
    for table in (tables.markers, tables.hints, tables.failures, tables.errors):
        assert table and all(entry.source for entry in table)
    rules = knowledge.read_yaml("xid_rules.yaml")
    for key in ("sympathetic_codes", "nvlink5_codes", "nvlink_codes"):
        assert rules[key]["source"] and rules[key]["reason"]
    assert rules["recovery_source"]


def test_no_source_points_at_a_document_users_lack() -> None:
    for file in sorted(knowledge.HERE.iterdir()):
        if file.suffix in {".csv", ".yaml", ".md"}:
            text = file.read_text()
            for word in ("decision-trees", "peers-gpu", "/work/", "../shared", "CONTRACT"):
                assert word not in text, f"{file.name} cites {word}"


def test_confidence_markers_are_known() -> None:
    for row in _csv("xid_catalog.csv"):
        assert row["confidence"] in {"P", "S", "M"}, row["code"]
    for row in _csv("metric_aliases.csv"):
        assert set(row["confidence"].split("/")) <= {"P", "S", "M", "C"}, row["metric"]
    for row in _csv("busbw_profiles.csv"):
        assert set(row["confidence"].split("/")) <= {"P", "S", "M", "C"}, row["profile"]


# --- Xid catalog ------------------------------------------------------------------------------


def test_xid_codes_are_unique() -> None:
    codes = [row["code"] for row in _csv("xid_catalog.csv")]
    assert len(codes) == len(set(codes))
    buckets = [row["bucket"] for row in _csv("xid_buckets.csv")]
    assert len(buckets) == len(set(buckets))


def test_every_catalog_bucket_maps_to_a_verdict_action() -> None:
    buckets = xc.BUCKET_TO_ACTION
    for entry in xc.CATALOG.values():
        if entry.immediate_action:
            assert entry.immediate_action in buckets, f"Xid {entry.code}: bucket {entry.immediate_action} has no action"
    assert set(buckets.values()) <= VERDICT_ACTIONS


def test_action_column_is_the_bucket_action() -> None:
    """The CSV's action column (for people reading the file) says what the code does."""
    for row in _csv("xid_catalog.csv"):
        bucket = row["immediate_action"]
        assert row["action"] == (xc.BUCKET_TO_ACTION[bucket] if bucket else "escalate"), row["code"]
        assert row["action"] == xc.action_for(int(row["code"])), row["code"]


def test_rule_codes_are_catalog_codes() -> None:
    known = set(xc.CATALOG)
    sympathetic, nvlink5, nvlink = xc.SYMPATHETIC_CODES, xc.NVLINK5_CODES, xc.NVLINK_CODES
    assert sympathetic <= known
    assert nvlink5 <= nvlink <= known
    assert set(xc.RECOVERY_ORDER) == set(xc.RECOVERY_TO_ACTION)
    assert set(xc.RECOVERY_TO_ACTION.values()) <= VERDICT_ACTIONS


@pytest.mark.parametrize(
    ("code", "mnemonic", "bucket", "action"),
    [
        (79, "GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM", "reboot-node"),
        (48, "GPU_ECC_DBE", "WORKFLOW_XID_48", "reset-gpu"),
        (13, "GR_EXCEPTION", "RESTART_APP", "restart-app"),
        (63, "INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE", "none"),
        (95, "UNCONTAINED_ERROR", "RESET_GPU", "reset-gpu"),
        (54, "SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS", "hardware-ticket"),
        (154, "GPU_RECOVERY_ACTION_CHANGED", "XID_154", "escalate"),
    ],
)
def test_pinned_catalog_rows(code: int, mnemonic: str, bucket: str, action: str) -> None:
    entry = xc.lookup(code)
    assert entry is not None
    assert (entry.mnemonic, entry.immediate_action, xc.action_for(code)) == (mnemonic, bucket, action)
    assert entry.source.startswith("[P]") and entry.source_date == "2025-10-29"


def test_pinned_rules() -> None:
    sympathetic, nvlink5 = xc.SYMPATHETIC_CODES, xc.NVLINK5_CODES
    # 43/45 at least; a code added to xid_rules.yaml `sympathetic_codes` changes no test but its scenario
    assert {43, 45} <= sympathetic and all(xc.lookup(code) is not None for code in sympathetic)
    assert nvlink5 == frozenset(range(144, 151))
    assert xc.normalize_recovery_action("Node Reboot Required") == "node-reboot"
    assert xc.normalize_recovery_action("Drain and Reset") == "drain-and-reset"
    assert xc.normalize_recovery_action("Drain P2P") == "drain-p2p"
    assert xc.RECOVERY_TO_ACTION["drain-p2p"] == "drain-and-reset"
    assert xc.action_for(154, "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)") == "reset-gpu"
    assert xc.lookup(163) is not None and xc.action_for(163) == "escalate"  # the catalog names no bucket
    assert "No GPU reset required" in xc.explain({"kind": "xid", "code": 163})["first_step"]
    assert xc.lookup(173) is None and xc.action_for(173) == "escalate"


def test_tables_are_loaded_once() -> None:
    assert xc.CATALOG is xc.CATALOG
    assert metrics.ALIASES is metrics.ALIASES
    assert engine_log.MARKERS is engine_log.MARKERS
    assert sku_profiles.PROFILES is sku_profiles.PROFILES
    assert nccl_tests.BUSBW_PROFILES is nccl_tests.busbw_profiles()


def test_unknown_attribute_still_raises() -> None:
    with pytest.raises(AttributeError):
        _ = xc.NO_SUCH_TABLE  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = nccl_tests.NO_SUCH_TABLE


# --- metric aliases ---------------------------------------------------------------------------


def test_alias_fields_and_parser_fields_agree_both_ways() -> None:
    read = set(metrics.SCALAR_FIELDS) | set(metrics.HISTOGRAMS) | set(metrics.LENGTH_HISTOGRAMS)
    fed = {alias.field for alias in metrics.ALIASES}
    assert fed - read == set(), "aliases feed fields the parser never reads"
    assert read - fed == set(), "the parser reads fields no alias feeds"


def test_alias_names_are_unique_and_match_their_engine() -> None:
    prefixes = dict(metrics.ENGINE_PREFIXES)
    names = [alias.metric for alias in metrics.ALIASES]
    assert len(names) == len(set(names))
    for alias in metrics.ALIASES:
        assert alias.metric.startswith(prefixes[alias.engine]), alias.metric


def test_pinned_aliases() -> None:
    kv = [alias.metric for alias in metrics.ALIASES if alias.field == "kv_cache_usage" and alias.engine == "vllm"]
    assert kv == ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]  # newest first: read first
    text = "vllm:gpu_cache_usage_perc 0.5\nvllm:kv_cache_usage_perc 0.25\n"
    assert metrics.parse(text).kv_cache_usage == 0.25


# --- engine log patterns ----------------------------------------------------------------------


def test_engine_phases_follow_the_global_order() -> None:
    for engine, phases in engine_log.ENGINE_PHASES.items():
        order = [engine_log.PHASE_ORDER.index(phase) for phase in phases]
        assert order == sorted(order), engine
        assert phases[-1] == "ready", engine
    engines = {marker.engine for marker in engine_log.MARKERS} - {None}
    assert engines <= set(engine_log.ENGINE_PHASES)


def test_pinned_engine_patterns() -> None:
    log = "INFO Available KV cache memory: 12.5 GiB\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GB"
    result = engine_log.parse(log)
    assert result.last_phase == "profiling"
    assert result.oom is not None and result.oom.kind == "cuda-oom"
    kinds = {error.kind for error in engine_log.ERROR_CLASSES}
    assert {"port-in-use", "hub-unreachable", "engine-core-failed"} <= kinds


def test_a_bad_regex_is_a_clear_error() -> None:
    with pytest.raises(knowledge.KnowledgeError, match=r"engine_log.yaml: markers\[3\]: bad regex"):
        knowledge.compile_pattern("(unclosed", "engine_log.yaml: markers[3]")


def test_a_missing_source_names_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t.csv").write_text("code,source\n1,x\n2,\n")
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    with pytest.raises(knowledge.KnowledgeError, match=r"t.csv: line 3: empty source"):
        knowledge.read_csv("t.csv")


# --- SKU profiles -----------------------------------------------------------------------------


def test_sku_profiles_are_unique_and_pinned() -> None:
    skus = [profile.sku for profile in sku_profiles.PROFILES]
    assert len(skus) == len(set(skus))
    for profile in sku_profiles.PROFILES:
        for pattern in profile.name_patterns:
            re.compile(pattern)
    h100 = sku_profiles.match_profile("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.sku == "H100-SXM" and h100.nvlink_links_per_gpu == (18,)
    pcie = sku_profiles.match_profile("NVIDIA H100 PCIe")
    assert pcie is not None and pcie.nvlink_links_per_gpu == (0, 12)
    assert "azurehpc-health-checks/issues/162" in pcie.source


# --- nccl-tests busbw profiles ---------------------------------------------------------------


def test_busbw_profiles_are_unique_positive_and_cited() -> None:
    rows = _csv("busbw_profiles.csv")
    names = [row["profile"] for row in rows]
    assert rows and len(names) == len(set(names))
    for row in rows:
        assert float(row["busbw"]) > 0 and int(row["min_size"]) > 0, row["profile"]
        assert "docs/sources.md#nccl-tests" in row["source"] and "https://github.com/" in row["source"], row["profile"]
    # The loader keeps every row, as the old Python table's shape: {name: {"min_size": int, "busbw": float}}.
    expected = {row["profile"]: {"min_size": int(row["min_size"]), "busbw": float(row["busbw"])} for row in rows}
    assert nccl_tests.busbw_profiles() == expected


def _nccl_sample(name: str) -> nccl_tests.NcclTestsResult:
    return nccl_tests.parse((NCCL_CORPUS / name).read_text())


def test_busbw_profile_figures_decide_the_judgement() -> None:
    """The files' figures, not a copy in code: changing a busbw or min_size changes these verdicts."""
    single = nccl_tests.judge_busbw(
        _nccl_sample("nccl-tests_all_reduce_h100_8gpu_single_node_nvswitch.txt"), "h100-sxm-8gpu-single-node"
    )
    # 466.57 and 470.73 GB/s at 1 and 2 GiB (256 and 512 MiB are under min_size) against 450
    assert (single["status"], single["compared"]) == ("ok", 2)
    assert single["worst_ratio"] == pytest.approx(466.57 / 450, abs=1e-4)
    multi = nccl_tests.judge_busbw(
        _nccl_sample("nccl-tests_all_reduce_h100_2node_16gpu_k8s_mpijob.txt"), "h100-8x400g-ib-multi-node"
    )
    # 195.20-196.52 GB/s at 1-8 GiB against 350 for 8x400G: every compared size is slow
    assert (multi["status"], multi["compared"], len(multi["rows_below"])) == ("slow", 4, 4)
    assert multi["worst_ratio"] == pytest.approx(195.20 / 350, abs=1e-4)
    assert {row["expected"] for row in multi["rows_below"]} == {350.0}


def _profiles_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> dict[str, dict[str, object]]:
    (tmp_path / "busbw_profiles.csv").write_text(text)
    monkeypatch.setattr(knowledge, "HERE", tmp_path)
    return nccl_tests.busbw_profiles.__wrapped__()  # the uncached loader: the shipped table stays cached


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ("a,1024,10,S,x\na,2048,20,S,y\n", "profile a is listed twice"),
        ("a,1024,0,S,x\n", "profile a: busbw must be positive"),
        ("a,-1,10,S,x\n", "profile a: min_size must be positive"),
        ("a,1 GiB,10,S,x\n", "profile a: min_size '1 GiB' is not a number"),
        ("a,1024.5,10,S,x\n", "profile a: min_size is not whole bytes"),
        ("a,1024,10,S,\n", "line 2: empty source"),
    ],
)
def test_a_bad_busbw_profile_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: str, error: str
) -> None:
    with pytest.raises(knowledge.KnowledgeError, match=error):
        _profiles_from(tmp_path, monkeypatch, "profile,min_size,busbw,confidence,source\n" + rows)


# --- the data ships in the wheel --------------------------------------------------------------


def test_data_files_are_package_data() -> None:
    """pyproject packages the whole nightowl/ folder; the files must sit inside it."""
    names = {file.name for file in knowledge.HERE.iterdir()}
    expected = {"xid_catalog.csv", "xid_buckets.csv", "xid_rules.yaml", "sku_profiles.yaml", "busbw_profiles.csv"}
    assert expected | {"metric_aliases.csv", "engine_log.yaml", "README.md"} <= names


def test_readme_describes_every_data_file() -> None:
    readme = (knowledge.HERE / "README.md").read_text()
    for file in knowledge.HERE.iterdir():
        if file.suffix in {".csv", ".yaml"}:
            assert f"`{file.name}`" in readme, file.name


# --- scripts/gen-xid-catalog ------------------------------------------------------------------


def _generator() -> ModuleType:
    module: ModuleType = load_script("gen-xid-catalog")
    return module


def _generate(tmp_path: Path, *extra: str) -> dict[str, dict[str, str]]:
    out = tmp_path / "xid_catalog.csv"
    out.write_text((knowledge.HERE / "xid_catalog.csv").read_text())
    args = [str(FIXTURE), "--output", str(out), "--catalog-date", "2025-10-29", "--source", "fixture", *extra]
    assert _generator().main(args) == 0
    with out.open(newline="") as handle:
        lines = [line for line in handle if not line.startswith("#")]
    return {row["code"]: row for row in csv.DictReader(lines)}


def test_generator_rewrites_catalog_columns_and_keeps_nightowls(tmp_path: Path) -> None:
    rows = _generate(tmp_path)
    assert rows["32"]["immediate_action"] == "RESTART_APP" and rows["32"]["action"] == "restart-app"
    assert rows["32"]["meaning"] == "Invalid or corrupted push buffer stream"  # new code: the description
    assert rows["13"]["mnemonic"] == "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY"
    assert rows["13"]["meaning"].startswith("graphics/SM engine exception")  # nightowl's words kept
    assert rows["79"]["source"] == "fixture" and rows["79"]["catalog_date"] == "2025-10-29"
    assert rows["172"]["immediate_action"] == "" and rows["172"]["action"] == "escalate"  # no bucket: escalate
    assert rows["95"]["immediate_action"] == "RESET_GPU"  # not in the input: kept
    assert [int(code) for code in rows] == sorted(int(code) for code in rows)


def test_generator_output_is_what_the_loader_reads(tmp_path: Path) -> None:
    """Regenerating the committed rows from the same facts changes no catalog column."""
    rows = _generate(tmp_path)
    committed = {row["code"]: row for row in _csv("xid_catalog.csv")}
    for code in ("13", "48", "79"):
        for column in ("mnemonic", "description", "immediate_action", "investigatory_action", "action", "meaning"):
            assert rows[code][column] == committed[code][column], (code, column)


def test_generator_stops_on_a_bucket_without_action(tmp_path: Path) -> None:
    catalog = tmp_path / "in.csv"
    catalog.write_text("code,mnemonic,description,immediate action,investigatory action\n7,X,Y,NEW_BUCKET,\n")
    out = tmp_path / "out.csv"
    with pytest.raises(SystemExit, match="NEW_BUCKET"):
        _generator().main([str(catalog), "--output", str(out), "--catalog-date", "2026-01"])


def test_generator_names_a_bad_header(tmp_path: Path) -> None:
    catalog = tmp_path / "in.csv"
    catalog.write_text("xid,name\n1,A\n")
    with pytest.raises(SystemExit, match="header lacks code"):
        _generator().main([str(catalog), "--output", str(tmp_path / "o.csv"), "--catalog-date", "2026-01"])
