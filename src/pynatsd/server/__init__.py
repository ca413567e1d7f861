"""The server: connections, routing, accounts and the server lifecycle."""
