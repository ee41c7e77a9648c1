"""turngym trainers: multi-turn RL on whole episodes, on TRL 1.16's GRPOTrainer.

PPO (GAE on our critic), GRPO, RLOO, turn-level GRPO, turn-level RLOO and GiGPO: ``algorithm`` names an entry of
the estimator registry (``turngym.trainers.estimators``; the math in ``turngym.trainers.advantages``), and an
estimator that needs values reads a critic (``turngym.trainers.critic``). ``turngym.trainers.trainer`` is the thin
adapter to TRL; row layouts, truncated importance sampling and the step's metrics live in ``layouts``, ``tis`` and
``metrics``. The config is ``turngym.trainers.config``, the SFT warm start ``turngym.trainers.sft``. See
docs/training.md.
"""

from turngym._extras import require

require("trl", extra="train", feature="turngym.trainers")
