"""The served app's resident memory before, during and after N visitors one after another (the load benchmark's
visitor: its own 200-token prompt, Memory, Compare; visitor 0 steps tau), for the checkout given.

    python docs/experiments/app-memory/visitors_in_turn.py 8 .            # this checkout
    python docs/experiments/app-memory/visitors_in_turn.py 8 ../other     # another one, served the same way
"""

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from hero_core.reports.served_app import embedded_env  # noqa: E402
from hero_lens_tools import app_load  # noqa: E402


def main() -> None:
    n, checkout = int(sys.argv[1]), Path(sys.argv[2]).resolve()
    prompts = app_load.held_out_prompts(n, 200)
    env = {**embedded_env(), "PYTHONPATH": str(checkout)}
    with app_load.served(checkout / "app" / "serve.py", env) as (base, proc):
        app_load.opener(base)
        app_load.settle(proc.pid)
        before = app_load.rss_mib(proc.pid)
        during = []
        for i, prompt in enumerate(prompts):
            app_load.visit(base, prompt, moves_tau=i == 0)
            during.append(round(app_load.rss_mib(proc.pid)))
        app_load.settle(proc.pid)
        later = []
        for _ in range(6):
            time.sleep(10)
            later.append(round(app_load.rss_mib(proc.pid)))
    print(json.dumps({"checkout": str(checkout), "before_mib": round(before), "after_each_visitor_mib": during,
                      "every_10_s_after_mib": later}))


if __name__ == "__main__":
    main()
