"""turngym trainers: whole-episode PPO (with a critic), GRPO and turn-level RLOO on TRL (in progress)."""
