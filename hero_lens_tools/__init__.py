"""The project's own tooling, beside the library and not part of it: what its tests, benchmarks and scripts use to
drive the app, never what a user's code imports.

``app_browser``: headless Chromium over the DevTools protocol (docs/architecture.md says why it is a small client of
our own rather than Selenium). ``make install`` installs this package beside ``hero_core``, so tests and scripts import
it as they import the library; ``hero_core`` never imports it (tests/test_architecture.py).
"""
