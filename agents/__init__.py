"""turngym agents: the agent interface, baselines, the rollout loop and evaluation."""

from turngym.agents.base import Agent, ContinuousAgent, EpisodeView, PerEpisodeAgent
from turngym.agents.baselines import HumanAgent, OracleAgent, RandomAgent, make_baseline
from turngym.agents.evaluate import EvalReport, evaluate, markdown_table, summarise
from turngym.agents.intervals import PassAtK, pass_at_k, pass_at_k_summary, wilson_interval
from turngym.agents.rollout import Trajectory, run_episodes

__all__ = [
    "Agent",
    "ContinuousAgent",
    "EpisodeView",
    "EvalReport",
    "HumanAgent",
    "OracleAgent",
    "PassAtK",
    "PerEpisodeAgent",
    "RandomAgent",
    "Trajectory",
    "evaluate",
    "make_baseline",
    "markdown_table",
    "pass_at_k",
    "pass_at_k_summary",
    "run_episodes",
    "summarise",
    "wilson_interval",
]
