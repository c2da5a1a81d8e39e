"""Report stage: the papers' tables regenerated from metrics, the paper's numbers beside."""
