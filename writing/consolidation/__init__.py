"""Consolidation, belief revision and lineage: one authoritative memory per concept, nothing lost."""
