"""Page objects of the operator console, and what the browser tests do besides clicking: a user
writing to the bot (a webhook request signed as Twilio signs it) and saving screenshots.

The page objects find things as an operator does, by role and visible text."""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from playwright.sync_api import expect

from tests.conftest import USER, inbound_form, sign
from tests.ops.console.support import TOKEN

#: A click whose page does real work (a document embedded by both models, a question
#: searched) waits this long for its page: a ceiling only a hang reaches on a busy machine.
WORK_MS = 60_000

#: Only ever talk to 127.0.0.1, whatever proxy the environment names.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def user_writes(base: str, body: str, user: str = USER) -> str:
    """Post a WhatsApp message from `user` to the served webhook, signed for its URL; return
    the TwiML answer."""
    form = inbound_form(body, user)
    url = f"{base}/whatsapp"
    request = urllib.request.Request(url, data=urlencode(form).encode(), method="POST",
                                     headers={"X-Twilio-Signature": sign(form, url=url)})
    with _DIRECT.open(request, timeout=15) as response:
        assert response.status == 200
        return response.read().decode()


def sign_in(page: Any, base: str, name: str = "", password: str = TOKEN) -> "Console":
    """Sign in through the form (the admin token with no name, by default)."""
    SignInPage(page, base).open().sign_in(name, password)
    console = Console(page, base)
    console.expect_signed_in_as(name or "admin")
    return console


def trouble(page: Any, answered: int | None = None) -> list[str]:
    """Return what went wrong on the page: JavaScript errors, console errors, CSP violations;
    with `answered`, leave out the failed loads the test caused on purpose (a 401 refusing a
    wrong password, say), which Chromium reports as console errors."""
    expected = f"the server responded with a status of {answered} "
    loads = [m for m in page.console_errors if answered is None or expected not in m]
    return [*page.errors, *loads, *page.csp_violations]


def stored_about(redis_client: Any, user: str = USER) -> dict[str, Any]:
    """Every key holding the user's data, with its value (DUMP), to compare before and after."""
    return {key: redis_client.dump(key) for key in redis_client.scan_iter(match=f"*{user[1:]}*")}


def shoot(page: Any, name: str) -> None:
    """Save a full-page screenshot as $CONSOLE_SHOTS/<name>.png, when CONSOLE_SHOTS is set."""
    folder = os.environ.get("CONSOLE_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


class Console:
    """What every console page has: the navigation, the flash messages, who is signed in."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base

    def go(self, area: str) -> None:
        """Follow a link of the top navigation ("Overview", "Users", "Queues")."""
        self.page.get_by_role("navigation", name="Console").get_by_role("link", name=area).click()

    def flash(self, text: str) -> None:
        """Expect a confirmation or an error at the top of the page."""
        expect(self.page.locator("p.flash").filter(has_text=text)).to_be_visible()

    def expect_signed_in_as(self, name: str) -> None:
        expect(self.page.get_by_text(f"Signed in as {name}")).to_be_visible()

    def sign_out(self) -> None:
        self.page.get_by_role("button", name="Sign out").click()


class SignInPage(Console):
    """/console/signin: a name (empty for the admin token) and a password."""

    def open(self) -> "SignInPage":
        self.page.goto(f"{self.base}/console/signin")
        return self

    def expect_shown(self) -> None:
        expect(self.page).to_have_url(re.compile(re.escape(f"{self.base}/console/signin")))
        expect(self.page.get_by_role("heading", name="Sign in")).to_be_visible()

    def sign_in(self, name: str = "", password: str = TOKEN) -> None:
        self.page.get_by_label("Name", exact=True).fill(name)
        self.page.get_by_label("Password or admin token").fill(password)
        self.page.get_by_role("button", name="Sign in").click()

    def expect_refused(self, message: str = "Wrong name or password.") -> None:
        expect(self.page.get_by_role("alert")).to_have_text(message)


class UsersPage(Console):
    """/console/users: one row per user, newest activity first."""

    def open(self) -> "UsersPage":
        self.page.goto(f"{self.base}/console/users")
        return self

    def numbers(self) -> list[str]:
        return self.page.get_by_role("table").get_by_role("link").all_inner_texts()

    def open_user(self, number: str) -> "UserPage":
        self.page.get_by_role("link", name=number, exact=True).click()
        return UserPage(self.page, self.base, number)


class UserPage(Console):
    """/console/users/<E164>: the conversation, the facts, the handover, reset and erase."""

    def __init__(self, page: Any, base: str, user: str = USER) -> None:
        super().__init__(page, base)
        self.user = user

    def open(self) -> "UserPage":
        self.page.goto(f"{self.base}/console/users/{self.user}")
        return self

    def section(self, name: str) -> Any:
        """The card whose heading is `name` ("Conversation", "Facts", "Handover", …)."""
        return self.page.locator("section.card").filter(has=self.page.get_by_role("heading", name=name, exact=True))

    def fact_row(self, key: str) -> Any:
        return self.section("Facts").get_by_role("row").filter(has=self.page.get_by_role("cell", name=key, exact=True))

    def edit_fact(self, key: str, value: str) -> None:
        row = self.fact_row(key)
        row.get_by_text("Edit").click()
        row.get_by_label(f"New value of {key}").fill(value)
        row.get_by_role("button", name=f"Save {key}").click()

    def delete_fact(self, key: str) -> None:
        self.page.get_by_role("button", name=f"Delete {key}").click()

    def reset(self) -> None:
        self.page.get_by_role("button", name="Reset conversation").click()

    def erase(self, typed: str) -> None:
        self.page.get_by_label(re.compile(r"^Type the number .* to confirm$")).fill(typed)
        self.page.get_by_role("button", name="Erase all data").click()

    # -- the handover ---------------------------------------------------------------------
    def take_over(self) -> None:
        self.page.get_by_role("button", name="Take over").click()

    def reply(self, text: str) -> None:
        self.page.get_by_label(re.compile(r"^Your reply, sent as ")).fill(text)
        self.page.get_by_role("button", name="Send reply").click()

    def hand_back(self) -> None:
        self.page.get_by_role("button", name="Hand back to the bot").click()

    def handover_message(self, text: str) -> Any:
        """The entry of the handover's log holding `text` (from the user or a person)."""
        return self.section("Handover").get_by_role("listitem").filter(has_text=text)

    def conversation_message(self, text: str) -> Any:
        """The first message of the stored conversation holding `text` (user, bot or person;
        the stand-in model's reply quotes the message it answers, so it comes second)."""
        return self.section("Conversation").get_by_role("listitem").filter(has_text=text).first


class KnowledgePage(Console):
    """/console/knowledge: the documents, adding one (an upload), trying a search, removing one."""

    def open(self, question: str | None = None) -> "KnowledgePage":
        self.page.goto(f"{self.base}/console/knowledge" + (f"?{urlencode({'q': question})}" if question else ""))
        return self

    def section(self, name: str | re.Pattern[str]) -> Any:
        """The card whose heading is `name` ("Documents", "Add a document", "Try a search", …)."""
        heading = self.page.get_by_role("heading", name=name, exact=True) if isinstance(name, str) \
            else self.page.get_by_role("heading", name=name)
        return self.page.locator("section.card").filter(has=heading)

    def document_row(self, title: str) -> Any:
        """The documents table's row of the document called `title`."""
        return self.section(re.compile(r"^Documents")).get_by_role("row").filter(
            has=self.page.get_by_role("link", name=title, exact=True))

    def add(self, path: Path, title: str = "", language: str = "") -> None:
        """Choose a file and add it, with a title and a language when given."""
        form = self.section("Add a document")
        form.get_by_label("File", exact=True).set_input_files(str(path))
        form.get_by_label(re.compile(r"^Title")).fill(title)
        if language:
            form.get_by_label("Language").select_option(language)
        form.get_by_role("button", name="Add document").click(timeout=WORK_MS)  # it embeds the document

    def search(self, question: str) -> None:
        form = self.section("Try a search")
        form.get_by_label("Question").fill(question)
        form.get_by_role("button", name="Search").click(timeout=WORK_MS)  # it embeds the question

    def results(self) -> Any:
        """The search's card: what would be injected, and every chunk considered."""
        return self.section(re.compile(r"^Search: "))

    def injected(self) -> Any:
        """The passages a message asking the question would carry, in order."""
        return self.results().get_by_role("listitem")

    def considered(self, chunk: str) -> Any:
        """The row of the considered chunk `chunk` ("faq#2")."""
        return self.results().get_by_role("row").filter(has=self.page.get_by_role("link", name=chunk, exact=True))

    def remove(self, doc_id: str, typed: str | None = None) -> None:
        """Open a document's Remove, type its id (or `typed`) to confirm and remove it."""
        row = self.document_row_by_id(doc_id)
        row.get_by_text("Remove", exact=True).click()
        row.get_by_label(f"Type {doc_id} to confirm").fill(doc_id if typed is None else typed)
        row.get_by_role("button", name=f"Remove {doc_id}").click()

    def document_row_by_id(self, doc_id: str) -> Any:
        return self.section(re.compile(r"^Documents")).get_by_role("row").filter(
            has=self.page.get_by_role("cell", name=doc_id, exact=True))
