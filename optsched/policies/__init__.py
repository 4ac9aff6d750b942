"""Placement policies: the optimizer and the greedy baselines it is compared against."""
