"""turngym recipes: the CLI, algorithm comparisons and configs."""
