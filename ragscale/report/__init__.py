"""Summaries, tables and exports over a run's records.jsonl."""
