"""Model-holding Ray workers. Heavy imports (torch, transformers) happen in __init__ only."""
