"""LLM judges: versioned prompt templates, renderers and parsers (pure code, no engine import)."""
