"""A qualification campaign (the 10-week joint test): ``campaign.toml`` (config), the
DuckDB history store (store), what it says across weeks (trend), Prometheus metrics
(metrics). Milestone gates live in ``milestone``, in the gate layer."""
