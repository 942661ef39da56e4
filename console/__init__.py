"""Commands for people at a terminal (``memoria recall``, ``import``, ``report``, ...): the only package
that prints results to stdout. The MCP server (``server/``) never imports it, so nothing here can reach a
stdio server's protocol stream; tests/test_architecture.py holds both rules."""
