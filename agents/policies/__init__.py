"""The built-in answering policies, one module each; `agents.registry` names them by dotted path."""
