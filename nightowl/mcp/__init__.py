"""nightowl as the GPU toolset of LLM investigators: a read-only Model Context Protocol server.

``tools.py`` holds the tools and their input schemas (no MCP SDK: testable and fast to import);
``bundles.py`` reads a bundle as untrusted input; ``config.py`` is the server's allow-list of live hosts;
``hooks.py`` the one place each outside piece is reached (the run path, the history store);
``server.py`` serves the tools with the official ``mcp`` SDK (``pip install 'nightowl[mcp]'``).
The verdict in every answer is nightowl's, computed from hashed evidence; never the model's.
"""
