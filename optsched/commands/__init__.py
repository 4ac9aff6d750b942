"""CLI verbs: each module registers its sub-parser and runs it, returning an exit code."""
