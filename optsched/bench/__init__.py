"""Benchmarks: trace replay against published results, and a synthetic topology benchmark."""
