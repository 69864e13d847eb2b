"""Privacy classification by rules (node/core/text/privacy.py, node/core/text/privacy_rules.json): hits, near misses,
redaction, overlaps, proposals that may only tighten, and malformed rules files."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gaml.node.core.text.privacy import ACTIONS, KINDS, PROPOSALS, Classification, Finding, Rules, iban_ok
from gaml.policy.errors import InvalidInput

RULES = Rules.load_default()

# Realistic samples (all fake): (rule, text, the secret or personal datum inside it).
HITS = [
    (
        "private_key",
        "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6\n"
        "-----END RSA PRIVATE KEY-----\nthanks",
        "MIIEpAIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6",
    ),
    ("aws_access_key_id", "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (
        "aws_secret_access_key",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    ),
    (
        "github_token",
        "git clone with ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 please",
        "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    ),
    (
        "github_token",
        "use github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzAB now",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzAB",
    ),
    ("openai_key", "my key is sk-abcdefghij1234567890XYZabc ok", "sk-abcdefghij1234567890XYZabc"),
    ("openai_key", "key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t done", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"),
    ("slack_token", "bot token xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl"),
    ("google_api_key", "maps AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
    (
        "jwt",
        "cookie eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
    ),
    ("bearer_token", "curl -H 'Authorization: Bearer abcdef1234567890xyz'", "abcdef1234567890xyz"),
    ("connection_string", "DATABASE_URL postgres://admin:s3cr3t-pw@db.internal:5432/app", "s3cr3t-pw"),
    ("secret_assignment", "db_password=hunter22 and more", "hunter22"),
    ("secret_assignment", "API_KEY: 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("secret_assignment_quoted", 'client_secret = "correct horse battery"', "correct horse battery"),
    ("password_phrase", "btw my wifi password is sunsh1ne! don't share", "sunsh1ne"),
    ("email", "mail me at mel.smith+gaml@example.co.uk tomorrow", "mel.smith+gaml@example.co.uk"),
    ("phone_international", "call +44 20 7946 0958 after 6", "+44 20 7946 0958"),
    ("phone_us", "her cell is (415) 555-0132.", "(415) 555-0132"),
    ("phone_us", "or 415-555-0132 at work", "415-555-0132"),
    ("credit_card", "card 4111 1111 1111 1111 exp 12/27", "4111 1111 1111 1111"),
    ("credit_card", "amex 378282246310005", "378282246310005"),
    ("iban", "IBAN GB82 WEST 1234 5698 7654 32 please", "GB82 WEST 1234 5698 7654 32"),
    ("iban", "to DE89370400440532013000", "DE89370400440532013000"),
    ("us_ssn", "SSN 123-45-6789.", "123-45-6789"),
]

NEAR_MISSES = [
    ("private_key", "the file starts with -----BEGIN PUBLIC KEY----- as usual"),
    ("aws_access_key_id", "AKIA is the prefix of AWS access key ids, e.g. AKIA1234"),
    ("aws_secret_access_key", "set aws_secret_access_key in the config file"),
    ("github_token", "tokens start with ghp_ or github_pat_ and are long"),
    ("openai_key", "the sk- prefix marks keys; we use sk-learn for this"),
    ("openai_key", "sk-abcdefghijklmnopqrstuvwxyz has no digit"),
    ("slack_token", "slack tokens look like xoxb-... and xoxp-..."),
    ("google_api_key", "Google keys start with AIza and are 39 characters long"),
    ("jwt", "a JWT starts with eyJ and has three parts"),
    ("bearer_token", "use a bearer token in the header"),
    ("connection_string", "connect with postgres://db.internal:5432/app (no credentials)"),
    ("secret_assignment", "the password is required and the token: abc"),
    ("secret_assignment", "password: "),
    ("secret_assignment", "password = ****"),
    ("password_phrase", "the password is required"),
    ("email", "ping @mel on slack or write to mel at example dot com"),
    ("phone_international", "version +1.2 and score +12"),
    ("phone_us", "we sold 415-5550 units; it was 2024-01-15 at 10:30"),
    ("credit_card", "order 4111 1111 1111 1112 did not ship"),
    ("credit_card", "timestamp 1700000000000000 and id 12345678"),
    ("iban", "IBAN GB82 WEST 1234 5698 7654 33 is mistyped"),
    ("us_ssn", "ticket 000-12-3456 and 123-00-4567"),
]


def test_default_rules_cover_the_required_kinds() -> None:
    """The shipped file loads and has a rule for every required kind of secret and personal datum."""
    assert set(RULES.names) >= {
        "private_key",
        "aws_access_key_id",
        "aws_secret_access_key",
        "github_token",
        "openai_key",
        "slack_token",
        "google_api_key",
        "jwt",
        "secret_assignment",
        "connection_string",
        "email",
        "phone_international",
        "phone_us",
        "credit_card",
        "iban",
        "us_ssn",
    }
    assert repr(RULES) == f"Rules({len(RULES.names)} rules)"


@pytest.mark.parametrize(("rule", "text", "secret"), HITS, ids=[f"{r}-{i}" for i, (r, _, _) in enumerate(HITS)])
def test_each_rule_hits_a_realistic_sample(rule: str, text: str, secret: str) -> None:
    """The rule finds its sample; redacting rules leave no trace of it, local_only rules keep the text as is."""
    c = RULES.classify(text)
    assert [f.rule for f in c.findings] == [rule]
    f = c.findings[0]
    assert text[f.start : f.end] == (secret if rule != "private_key" else text[f.start : f.end])
    assert secret in text[f.start : f.end]
    if f.action == "redact":
        assert secret not in c.text
        assert f"[REDACTED:{rule}]" in c.text
        assert "redacted" in c.tags
        assert not c.local_only
    else:
        assert f.action == "local_only"
        assert c.text == text and c.local_only
        assert "redacted" not in c.tags
    assert f"privacy:{f.kind}" in c.tags


@pytest.mark.parametrize(("rule", "text"), NEAR_MISSES, ids=[f"{r}-{i}" for i, (r, _) in enumerate(NEAR_MISSES)])
def test_each_rule_misses_a_near_miss(rule: str, text: str) -> None:
    """Prose about secrets, values that fail a check, and look-alike numbers are not findings."""
    c = RULES.classify(text)
    assert c == Classification(text, (), False, ())


def test_redaction_keeps_the_key_and_only_replaces_the_value() -> None:
    """A generic assignment keeps its key; a connection string keeps its user and host."""
    assert RULES.classify("db_password=hunter22").text == "db_password=[REDACTED:secret_assignment]"
    assert (
        RULES.classify("postgres://admin:s3cr3t-pw@db.internal/app").text
        == "postgres://admin:[REDACTED:connection_string]@db.internal/app"
    )
    assert RULES.classify("my wifi password is sunsh1ne!").text == "my wifi password is [REDACTED:password_phrase]!"


def test_findings_are_positions_in_the_original_text_and_redaction_runs_right_to_left() -> None:
    """Several redactions in one text: each finding spans its secret in the original, and all are replaced."""
    text = "a AKIAIOSFODNN7EXAMPLE b ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 c 123-45-6789 d"
    c = RULES.classify(text)
    assert [(f.rule, text[f.start : f.end]) for f in c.findings] == [
        ("aws_access_key_id", "AKIAIOSFODNN7EXAMPLE"),
        ("github_token", "ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
        ("us_ssn", "123-45-6789"),
    ]
    assert c.text == "a [REDACTED:aws_access_key_id] b [REDACTED:github_token] c [REDACTED:us_ssn] d"
    assert c.tags == ("privacy:credential", "privacy:personal", "redacted")


def test_emails_and_phones_make_the_item_local_only() -> None:
    """Personal contact data is not redacted by default: the item stays on this node."""
    c = RULES.classify("Mel's email is mel@example.com and her phone is +1 415 555 0132.")
    assert [f.rule for f in c.findings] == ["email", "phone_international"]
    assert c.local_only and c.text.endswith("+1 415 555 0132.")
    assert c.tags == ("privacy:personal",)


def test_clean_text_is_unchanged() -> None:
    """A text with nothing private comes back identical, with no findings or tags."""
    text = "Fixed the failing test in src/app.py; all 42 tests pass now. Version 1.2.3 shipped on 2024-01-15."
    assert RULES.classify(text) == Classification(text, (), False, ())


def test_classifying_redacted_text_changes_nothing() -> None:
    """Placeholders are not redacted again: classify is idempotent on its own output."""
    for _, text, _ in HITS:
        once = RULES.classify(text).text
        assert RULES.classify(once).text == once


def test_secrets_never_appear_in_reprs() -> None:
    """Findings and classifications carry rule names and offsets, never the secret."""
    for _, text, secret in HITS:
        c = RULES.classify(text)
        if c.findings[0].action == "redact":
            assert secret not in repr(c)
        assert all(secret not in repr(f) for f in c.findings)


# -- overlaps ----------------------------------------------------------------------------------------------------------


def rules_file(*rules: dict[str, str]) -> bytes:
    return orjson.dumps({"version": 1, "rules": list(rules)})


def rule(name: str, pattern: str, action: str = "redact", kind: str = "credential") -> dict[str, str]:
    return {"name": name, "kind": kind, "action": action, "pattern": pattern}


def test_overlap_earliest_then_longest_then_first_listed_wins() -> None:
    """Of overlapping matches, the earliest-starting wins; on equal starts, the longest; then the first listed."""
    rules = Rules.load(
        rules_file(rule("short", "abc"), rule("long", "abcdef"), rule("inner", "bcd"), rule("late", "ef"))
    )
    c = rules.classify("xabcdefx")
    assert [f.rule for f in c.findings] == ["long"]
    assert c.text == "x[REDACTED:long]x"
    tie = Rules.load(rules_file(rule("first", "ab"), rule("second", "ab")))
    assert [f.rule for f in tie.classify("ab").findings] == ["first"]


def test_overlap_in_the_default_rules() -> None:
    """An OpenAI key assigned to a variable is one finding, named by the assignment that starts earlier."""
    text = "OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8t"
    c = RULES.classify(text)
    assert [f.rule for f in c.findings] == ["secret_assignment"]
    assert c.text == "OPENAI_API_KEY=[REDACTED:secret_assignment]"


def test_a_secret_hidden_inside_a_longer_weaker_match_is_still_redacted() -> None:
    """A flag that starts earlier does not shield a secret inside it from its redaction, nor drop local_only."""
    rules = Rules.load(
        rules_file(
            rule("note", r"note: [^\n]*", action="flag", kind="personal"),
            rule("key", r"KEY-\d{6}"),
            rule("mail", r"\w+@\w+\.com", action="local_only", kind="personal"),
        )
    )
    c = rules.classify("note: use KEY-123456 and mail a@b.com")
    assert [f.rule for f in c.findings] == ["note", "key", "mail"]
    assert c.text == "note: use [REDACTED:key] and mail a@b.com"
    assert c.local_only


def test_overlapping_redactions_merge_under_the_first_placeholder() -> None:
    """Two redactions that overlap in their spans become one placeholder; nothing of either survives."""
    rules = Rules.load(rules_file(rule("a", r"x=(?P<value>\w+)"), rule("b", r"SECRET\w*TAIL")))
    c = rules.classify("x=abcSECRETmidTAIL end")
    assert c.text == "x=[REDACTED:a] end"
    rules2 = Rules.load(rules_file(rule("a", r"x=(?P<value>[a-z]+)"), rule("b", r"cdSECRET")))
    c2 = rules2.classify("x=abcdSECRET end")
    assert c2.text == "x=[REDACTED:a] end"
    assert [f.rule for f in c2.findings] == ["a", "b"]


# -- checks ------------------------------------------------------------------------------------------------------------


def test_luhn_and_iban_checks() -> None:
    """Card numbers must pass Luhn and IBANs mod-97; the same shapes failing the check are not findings."""
    assert [f.rule for f in RULES.classify("4111-1111-1111-1111").findings] == ["credit_card"]
    assert RULES.classify("4111-1111-1111-1112").findings == ()
    assert iban_ok("GB82 WEST 1234 5698 7654 32")
    assert not iban_ok("GB82 WEST 1234 5698 7654 33")
    assert not iban_ok("GB82")


# -- proposals ---------------------------------------------------------------------------------------------------------


def test_proposals_can_only_tighten() -> None:
    """local_only and redact proposals make an item local_only; none changes nothing; nothing loosens."""
    clean = RULES.classify("We met at the park.")
    assert RULES.apply_proposal(clean, "none") == clean
    tightened = RULES.apply_proposal(clean, "local_only")
    assert tightened.local_only and tightened.text == clean.text and tightened.findings == ()
    assert tightened.tags == ("privacy:proposed",)
    assert RULES.apply_proposal(clean, "Redact").local_only
    assert RULES.apply_proposal(clean, " local-only ").local_only

    private = RULES.classify("mail mel@example.com")
    for proposal in PROPOSALS:
        after = RULES.apply_proposal(private, proposal)
        assert after.local_only and after.text == private.text and after.findings == private.findings


def test_invalid_proposals_are_rejected() -> None:
    """A proposal outside the three known values raises InvalidInput rather than being guessed at."""
    c = RULES.classify("hello")
    for bad in ("public", "share", "", "loosen"):
        with pytest.raises(InvalidInput, match="privacy proposal"):
            RULES.apply_proposal(c, bad)


@settings(derandomize=True, database=None, max_examples=100)
@given(text=st.text(max_size=80), proposal=st.sampled_from(PROPOSALS))
def test_property_proposals_never_loosen(text: str, proposal: str) -> None:
    """For any text and any proposal, local_only never goes from True to False and the text never changes."""
    c = RULES.classify(text)
    after = RULES.apply_proposal(c, proposal)
    assert after.local_only >= c.local_only
    assert after.text == c.text and after.findings == c.findings
    assert set(c.tags) <= set(after.tags)


# -- malformed rules files ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{not json", "not valid JSON"),
        (b"[]", "top level"),
        (orjson.dumps({"version": 2, "rules": []}), "unsupported version"),
        (orjson.dumps({"version": 1, "rules": {}}), "'rules' must be a list"),
        (orjson.dumps({"version": 1, "rules": ["x"]}), "rule #0 is not an object"),
        (rules_file({"kind": "credential", "action": "redact", "pattern": "x"}), "rule #0 needs a name"),
        (rules_file(rule("Bad Name", "x")), "needs a name"),
        (rules_file(rule("dup", "x"), rule("dup", "y")), "'dup': the name is used twice"),
        (rules_file(rule("my_rule", "x", action="delete")), "'my_rule': unknown action 'delete'"),
        (rules_file(rule("my_rule", "x", kind="medical")), "'my_rule': unknown kind 'medical'"),
        (rules_file(rule("my_rule", "(unclosed")), "'my_rule': pattern does not compile"),
        (rules_file(rule("my_rule", "")), "'my_rule': pattern must be a non-empty string"),
        (rules_file({**rule("my_rule", "x"), "check": "crc"}), "'my_rule': unknown check 'crc'"),
        (rules_file({**rule("my_rule", "x"), "acton": "redact"}), "'my_rule': unknown key(s) acton"),
    ],
)
def test_malformed_rules_files_are_rejected_naming_the_rule(data: bytes, message: str) -> None:
    """Bad JSON, unknown actions, kinds, checks or keys, bad regexes and duplicate names raise InvalidInput."""
    with pytest.raises(InvalidInput) as info:
        Rules.load(data)
    assert message in str(info.value)


def test_rules_round_trip_through_load() -> None:
    """A minimal valid file loads; its names keep file order; every kind and action is accepted."""
    rules = Rules.load(rules_file(*(rule(f"r_{k}_{a}", f"{k}-{a}", action=a, kind=k) for k in KINDS for a in ACTIONS)))
    assert rules.names == tuple(f"r_{k}_{a}" for k in KINDS for a in ACTIONS)
    c = rules.classify("credential-flag")
    assert c.findings == (Finding("r_credential_flag", "credential", "flag", 0, 15),)
    assert c.tags == ("privacy:credential",) and not c.local_only and c.text == "credential-flag"


def test_classify_rejects_non_text() -> None:
    """classify takes a str."""
    with pytest.raises(TypeError):
        RULES.classify(b"bytes")  # type: ignore[arg-type]


# -- property: injected credentials never survive ----------------------------------------------------------------------

ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
B64URL = ALNUM + "-_"


def chars(alphabet: str, n: int, m: int | None = None) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=n, max_size=n if m is None else m)


def with_digit(s: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.builds(lambda body, d: body + d, s, st.sampled_from("0123456789"))


# Each strategy yields (text to inject, the secret inside it that must not survive).
SECRETS: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "private_key": st.builds(
        lambda label, body: (f"-----BEGIN {label}PRIVATE KEY-----\n{body}\n-----END {label}PRIVATE KEY-----", body),
        st.sampled_from(["", "RSA ", "EC ", "OPENSSH ", "ENCRYPTED "]),
        chars(ALNUM + "+/=\n", 24, 120).filter(lambda b: b.strip() == b and len(b.strip()) >= 24),
    ),
    "aws_access_key_id": st.builds(
        lambda p, b: (p + b, p + b), st.sampled_from(["AKIA", "ASIA"]), chars(UPPER_DIGITS, 16)
    ),
    "aws_secret_access_key": st.builds(
        lambda k, v: (f"{k}={v}", v),
        st.sampled_from(["aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "aws_secret_key"]),
        chars(ALNUM + "/+", 40),
    ),
    "github_token": st.builds(
        lambda p, b: (p + b, p + b),
        st.sampled_from(["ghp_", "gho_", "ghs_", "github_pat_"]),
        with_digit(chars(ALNUM, 36, 60)),
    ),
    "openai_key": st.builds(
        lambda p, b: (p + b, p + b), st.sampled_from(["sk-", "sk-proj-"]), with_digit(chars(ALNUM + "_-", 20, 60))
    ),
    "slack_token": st.builds(
        lambda p, a, b: (f"{p}{a}-{b}", f"{p}{a}-{b}"),
        st.sampled_from(["xoxb-", "xoxp-", "xoxa-", "xoxs-"]),
        chars("0123456789", 10, 13),
        chars(ALNUM, 12, 32),
    ),
    "google_api_key": st.builds(lambda b: ("AIza" + b, "AIza" + b), chars(B64URL, 35)),
    "jwt": st.builds(
        lambda h, p, s: (f"eyJ{h}.eyJ{p}.{s}", f"eyJ{h}.eyJ{p}.{s}"),
        chars(B64URL, 5, 40),
        chars(B64URL, 5, 60),
        chars(B64URL, 10, 60),
    ),
    "secret_assignment": st.builds(
        lambda k, sep, v: (f"{k}{sep}{v}", v),
        st.sampled_from(["password", "DB_PASSWORD", "api_key", "apiKey", "token", "client_secret", "passwd", "pwd"]),
        st.sampled_from(["=", ": ", " = ", ":"]),
        with_digit(chars(ALNUM + "!#$%()*+-./<>?@^_{|}~", 6, 30)),
    ),
    "connection_string": st.builds(
        lambda scheme, user, pw: (f"{scheme}://{user}:{pw}@db.example.com:5432/app", pw),
        st.sampled_from(["postgres", "mysql", "mongodb+srv", "redis", "amqp"]),
        chars(ALNUM, 3, 12),
        with_digit(chars(ALNUM + "-_.~!$", 6, 24)),
    ),
}


@settings(derandomize=True, database=None, max_examples=60, suppress_health_check=[HealthCheck.filter_too_much])
@given(
    kind=st.sampled_from(sorted(SECRETS)),
    data=st.data(),
    prefix=st.text(max_size=40),
    suffix=st.text(max_size=40),
)
def test_property_injected_credentials_never_survive(kind: str, data: st.DataObject, prefix: str, suffix: str) -> None:
    """For any surrounding text, an injected secret of every credential kind is absent from the classified text."""
    injected, secret = data.draw(SECRETS[kind], label=kind)
    assume(secret not in prefix and secret not in suffix)
    text = f"{prefix} {injected} {suffix}"
    c = RULES.classify(text)
    assert secret not in c.text
    assert "redacted" in c.tags and "privacy:credential" in c.tags
    assert all(secret not in repr(f) for f in c.findings)


def test_classification_is_frozen() -> None:
    """Classifications and findings are immutable values."""
    c = RULES.classify("mail mel@example.com")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.local_only = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.findings[0].start = 0  # type: ignore[misc]


PATHOLOGICAL = [
    "a" * 5000,
    "1 " * 2500,
    "a." * 2500,
    "a@" * 2500,
    "password=" * 500,
    "sk-" * 1500,
    "eyJa." * 1000,
    "-----BEGIN RSA PRIVATE KEY-----" + "A" * 4000,
    "+1 " * 1500,
    "DE89 " * 1000,
    "Bearer " * 700,
]


def test_pathological_inputs_complete() -> None:
    """Long repetitive inputs, where a backtracking regex would blow up (and hang this test), are classified.

    Their speed is measured by ``bench/ingest_bench.py`` (which reads this list), not asserted here."""
    for text in PATHOLOGICAL:
        c = RULES.classify(text)
        assert len(c.text) <= len(text) + 64 * len(c.findings), text[:20]
