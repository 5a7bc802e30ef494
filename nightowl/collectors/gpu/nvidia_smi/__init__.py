"""The nvidia-smi family: one module per kind (``nvidia_smi``, ``nvidia_smi_query``), the format readers
(``tree`` for ``-q`` text and XML, ``table``) and the result types they share (``results``)."""
