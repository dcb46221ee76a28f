"""Tools that ordinary user code has and the stdio tests drive in a real ``mcp_stdio`` process
(``tests/stdio_settings.py``): one that prints, slow sync ones."""
