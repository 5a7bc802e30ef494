"""The runbook library: finding the built-in and site runbooks (``runbooks``) and rehearsing them on
recorded cases (``rehearse``, behind ``nightowl runbook test``)."""
