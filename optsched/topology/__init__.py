"""Topology facts: NVLink islands inside a node, and domains (block, rack, host) across nodes."""
