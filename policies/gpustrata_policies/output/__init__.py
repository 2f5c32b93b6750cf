"""How findings are written: text, JSON, SARIF, markdown, and the generated rules page."""
