"""What nightowl writes for people from a finished run besides the bundle's evidence: the status update
(``status_update``); the postmortem draft has its own package, ``nightowl.postmortem``."""
