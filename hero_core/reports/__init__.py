"""What the repository's scripts write: the docs pages and README blocks rendered from result files, and the
headless-browser harness that drives the app for the browser tests and the README screenshots."""
