"""The Ray-facing layer: stage functions, the plan, execution. Ray is imported lazily."""
