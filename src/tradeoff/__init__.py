"""tradeoff: a reproducible pipeline for the clean-accuracy / adversarial-robustness trade-off papers."""

__version__ = "0.1.0"
