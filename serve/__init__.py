"""The library served to other programs: the MCP server (`moviemem mcp`) and the checked film tools it
shares with the CLI (`moviemem search`, `show`), so an agent and a person get the same answers."""
