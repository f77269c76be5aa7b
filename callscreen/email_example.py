"""Renders the README's example alert email (docs/example-alert-email.png) from the real templates:
`python -m callscreen.email_example [out.png]` (`make email-example`). Needs a Chromium on PATH."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from alerting.messages import about, email

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "example-alert-email.png"
EXAMPLE = {
    "id": "alrt_7Qx2mVb9KcT4nWp1LsZe",
    "type": "caller.rotating_numbers",
    "account_id": "acct_3fK9dLq2Wm8ZtR1x",
    "created_at": "2026-11-24T09:41:07.512Z",
    "severity": "critical",
    "data": {"number": "+14155550100", "callers": ["+12125550140", "+12125550141", "+12125550142"]},
}


def html() -> str:
    message = email(about(EXAMPLE, "https://callscreen.example.com"), "alerts@callscreen.example.com", "you")
    part = message.get_body(("html",))
    assert part is not None
    return str(part.get_content())


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        print("no Chromium on PATH (Debian: apt-get install chromium)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "email.html"
        page.write_text(html())
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        command += [f"--screenshot={out.resolve()}", "--window-size=640,390", page.as_uri()]
        subprocess.run(command, check=True, capture_output=True, cwd=tmp)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
