"""Fetch engines (``--engine mooncake|nixl``): docs/engines.md."""
