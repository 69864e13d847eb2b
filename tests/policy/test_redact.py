"""Deterministic redaction (policy/redact.py): detectors, overlaps, idempotence, spans, JSON values and the packet."""

from __future__ import annotations

import base64
import itertools
import json
import random
import re
import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gaml.policy.errors import RedactionRefused
from gaml.policy.model import (
    Asset,
    Creator,
    ExportPolicy,
    FrozenDict,
    InferencePolicy,
    Level,
    PrivacyScope,
    ReplicationPolicy,
    Retention,
    TrainingPolicy,
    content_id,
)
from gaml.policy.redact import (
    BASE64_ENTROPY_MIN_BITS,
    HEX_ENTROPY_MIN_BITS,
    KINDS,
    PLACEHOLDERS,
    Finding,
    JsonFinding,
    luhn_ok,
    redact_json,
    redact_text,
    redacted_packet,
    shannon_bits,
)

NOW = 1_700_000_000_000_000
SECOND = 1_000_000
ENTITIES = ("Zorvath Quellin", "Mirabel", "O'Dunnagh")
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "aFDrBz9vFqU4yI0yGhPM5XeOjEMmZ7uR8h9Lk2PB\n-----END RSA PRIVATE KEY-----"
)


PLACEHOLDER_RE = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS.values()))


def rebuild(text: str, findings: list[Finding]) -> str:
    """The redacted text as the findings describe it: each span of the original replaced by its placeholder."""
    out, pos = [], 0
    for f in findings:
        out += [text[pos : f.start], f.placeholder]
        pos = f.end
    return "".join([*out, text[pos:]])


def check_spans(text: str, out: str, findings: list[Finding]) -> None:
    assert all(f.kind in KINDS and 0 <= f.start < f.end <= len(text) for f in findings)
    assert all(a.end <= b.start for a, b in itertools.pairwise(findings)), "sorted and disjoint"
    assert rebuild(text, findings) == out


# -- table-driven positives and negatives ----------------------------------------------------------------------------

POSITIVES = [
    # e-mail
    ("mail alice.smith+tag@mail.example.co.uk today", "mail [EMAIL] today"),
    ("<bob_99@example.org>", "<[EMAIL]>"),
    # phone: international and national formats
    ("call +1 555 123 4567 now", "call [PHONE] now"),
    ("call +44 20 7946 0958.", "call [PHONE]."),
    ("tel +33 6 12 34 56 78", "tel [PHONE]"),
    ("tel +49-30-1234567", "tel [PHONE]"),
    ("tel +1 (555) 123-4567", "tel [PHONE]"),
    ("tel:+15551234567", "tel:[PHONE]"),
    ("office (555) 123-4567", "office [PHONE]"),
    ("office (020) 7946 0958", "office [PHONE]"),
    ("cell 555-123-4567", "cell [PHONE]"),
    ("cell 555.123.4567", "cell [PHONE]"),
    ("cell 555 123 4567", "cell [PHONE]"),
    ("cell 1-555-123-4567", "cell [PHONE]"),
    ("desk 555-1234", "desk [PHONE]"),
    ("london 020 7946 0958", "london [PHONE]"),
    ("paris 06 12 34 56 78", "paris [PHONE]"),
    ("berlin 030 12345678", "berlin [PHONE]"),
    # keys and tokens
    ("key AKIAIOSFODNN7EXAMPLE ok", "key [SECRET] ok"),
    ("key ASIAY34FZKBOKMUTVV7A ok", "key [SECRET] ok"),
    ("ghp_" + "aB3" * 12, "[SECRET]"),
    ("gho_" + "Zx9" * 12, "[SECRET]"),
    ("ghs_" + "Qw1" * 12, "[SECRET]"),
    ("github_pat_11ABCDEFG0abcdefghijkl_" + "Mn0pQ" * 11, "[SECRET]"),
    ("sk-proj-" + "T3Blbk" * 8 + "9", "[SECRET]"),
    ("sk-ant-api03-" + "aZ_-9" * 16, "[SECRET]"),
    ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", "slack [SECRET]"),
    ("slack xoxp-1234567890-abcdefghij", "slack [SECRET]"),
    ("google AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI", "google [SECRET]"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "stripe [SECRET]"),
    (f"jwt {JWT} end", "jwt [SECRET] end"),
    (f"key:\n{PEM}\nend", "key:\n[SECRET]\nend"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n(truncated)", "[SECRET]"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----", "[SECRET]"),
    ("Authorization: Bearer abc.DEF-123_xyz", "Authorization: Bearer [SECRET]"),
    ('"authorization": "Basic dXNlcjpwYXNzd29yZA=="', '"authorization": "Basic [SECRET]"'),
    ("curl -H 'Authorization: token ghx12345'", "curl -H 'Authorization: token [SECRET]'"),
    ("send it with bearer 9f8e7d6c5b4a3210fe", "send it with bearer [SECRET]"),
    ("password=hunter2 then", "password=[SECRET] then"),
    ("passwd: correct-horse", "passwd: [SECRET]"),
    ("secret: s3cr3t!", "secret: [SECRET]"),
    ("api_key=XYZ123&page=2", "api_key=[SECRET]&page=2"),
    ("?token=abc.def&x=1", "?token=[SECRET]&x=1"),
    ("DB_PASSWORD=Pa55w0rd", "DB_PASSWORD=[SECRET]"),
    ('{"password": "two words"}', '{"password": "[SECRET]"}'),
    ("aws_secret_access_key = wJalrXUtnFEMI", "aws_secret_access_key = [SECRET]"),
    ("https://deploy:pa55w0rd@git.example.com/repo", "https://[EMAIL]/repo"),
    ("sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 ok", "sha [SECRET] ok"),
    ("id 0123456789abcdef0123456789abcdef ok", "id [SECRET] ok"),
    ("blob wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY==", "blob [SECRET]"),
    # IPv4
    ("host 10.0.0.1 up", "host [IP] up"),
    ("bind 192.168.1.254:8080", "bind [IP]:8080"),
    ("ips 8.8.8.8, 255.255.255.255", "ips [IP], [IP]"),
    # cards (Luhn-valid)
    ("visa 4111 1111 1111 1111 exp", "visa [CARD] exp"),
    ("mc 5555-5555-5555-4444", "mc [CARD]"),
    ("amex 3782 822463 10005", "amex [CARD]"),
    ("raw 4012888888881881", "raw [CARD]"),
    # names (entities): case-insensitive, whole word, any whitespace inside a name
    ("met Zorvath Quellin today", "met [NAME] today"),
    ("met ZORVATH\n  quellin today", "met [NAME] today"),
    ("Mirabel's notes", "[NAME]'s notes"),
    ("ask o'dunnagh", "ask [NAME]"),
]


@pytest.mark.parametrize(("text", "expected"), POSITIVES, ids=[t[:24] for t, _ in POSITIVES])
def test_each_kind_is_redacted(text: str, expected: str) -> None:
    """Every detector replaces its match with its typed placeholder and leaves the surrounding text alone."""
    out, findings = redact_text(text, ENTITIES)
    assert out == expected
    assert [f.placeholder for f in findings] == PLACEHOLDER_RE.findall(expected)
    check_spans(text, out, findings)


NEGATIVES = [
    "in 2024 and 1999",
    "2023 2024 2025",
    "on 2024-01-15",
    "on 15.01.2024",
    "on 01/15/2024",
    "on 01.02.2024 and 05-06-2023",
    "on 2024-01-15T10:30:00Z",
    "at 12:30",
    "at 12:30:45",
    "Python 3.11.7",
    "release v1.2.3 and 2.0.1-rc1",
    "build 10.0.19041.1",
    "pi is 3.14159265358979",
    "42 items, 7 left, 100%",
    "call 911",
    "room 1234",
    "count 1234567",
    "at 1700000000000000",
    "1 2 3 4 5 6 7 8 9",
    "card 4111 1111 1111 1112",
    "id 1234 5678 9012 3452",
    "999.999.999.999",
    "uuid 550e8400-e29b-41d4-a716-446655440000 in prose",
    "AbstractSingletonProxyFactoryBeanImplementation",
    "this_is_a_very_long_function_name_for_testing",
    "the bearer of bad news",
    "tokens: 5 and max_tokens=512",
    "password reset, token budget, secret garden",
    "password=",
    "scikit sk-learn",
    "Mirabelle and Quellinson are other people",
    "the quick brown fox jumps over the lazy dog",
    "user@localhost",
]


@pytest.mark.parametrize("text", NEGATIVES)
def test_non_secrets_are_left_alone(text: str) -> None:
    """Years, dates, times, versions, short and bare numbers, UUIDs, identifiers and ordinary words are kept."""
    assert redact_text(text, ENTITIES) == (text, [])


def test_uuid_is_kept_but_undashed_hex_is_a_secret() -> None:
    """The decision on ids: a dashed UUID is an identifier; 32+ undashed hex (a hash, an asset id) could be a key."""
    uuid = "550e8400-e29b-41d4-a716-446655440000"
    assert redact_text(f"ref {uuid}")[0] == f"ref {uuid}"
    assert redact_text(f"ref {uuid.replace('-', '')}")[0] == "ref [SECRET]"


def test_entropy_thresholds_are_the_documented_ones() -> None:
    """A 32+ character string is a secret exactly when it clears the documented entropy threshold for its alphabet."""
    low_hex = "0123456789" * 4  # hex with digits only: no letter
    low_b64 = "ab1" * 12  # 1.58 bits per character
    assert shannon_bits(low_b64) < BASE64_ENTROPY_MIN_BITS
    assert redact_text(low_b64)[1] == []
    assert redact_text(low_hex)[1] == []
    hex40 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
    assert shannon_bits(hex40) >= HEX_ENTROPY_MIN_BITS
    assert redact_text(hex40)[0] == "[SECRET]"
    assert shannon_bits("") == 0.0


def test_luhn() -> None:
    """The Luhn check accepts known test card numbers and rejects a changed digit."""
    assert luhn_ok("4111111111111111") and luhn_ok("378282246310005") and luhn_ok("79927398713")
    assert not luhn_ok("4111111111111112") and not luhn_ok("79927398710")


# -- overlaps ---------------------------------------------------------------------------------------------------------


def test_longest_match_names_the_kind() -> None:
    """An entity inside an e-mail address is part of the longer e-mail finding, not a name."""
    out, findings = redact_text("write alice@example.com", ["alice"])
    assert out == "write [EMAIL]"
    assert findings == [Finding("email", 6, 23)]


def test_equal_spans_go_to_the_detector_listed_first() -> None:
    """An assigned password that is also an e-mail address is a secret (the assignment detector comes first)."""
    assert redact_text("password=alice@example.com")[0] == "password=[SECRET]"


def test_partial_overlap_removes_the_union() -> None:
    """URL credentials overlapping an e-mail-shaped host leave no fragment of either: the union is removed."""
    text = "https://deploy:pa55w0rd@git.example.com/repo"
    out, findings = redact_text(text)
    assert "pa55w0rd" not in out and "deploy" not in out
    assert [text[f.start : f.end] for f in findings] == ["deploy:pa55w0rd@git.example.com"]


def test_a_match_hidden_by_its_neighbour_is_found_on_the_next_pass() -> None:
    """A name glued to a phone number is a whole word once the number is removed, so it is redacted too."""
    text = "555-123-4567Mirabel"
    out, findings = redact_text(text, ENTITIES)
    assert out == "[PHONE][NAME]"
    assert findings == [Finding("phone", 0, 12), Finding("name", 12, 19)]


def test_entities_longest_first_and_order_free() -> None:
    """A longer name wins over a name it contains, and the order of the entity list does not matter."""
    text = "Ann Lee met Ann"
    assert redact_text(text, ["Ann", "Ann Lee"]) == redact_text(text, ["Ann Lee", "Ann"])
    out, findings = redact_text(text, ["Ann", "Ann Lee"])
    assert out == "[NAME] met [NAME]"
    assert [text[f.start : f.end] for f in findings] == ["Ann Lee", "Ann"]


def test_entity_names_are_literal() -> None:
    """Regex metacharacters in a name are matched literally, and an empty name is ignored."""
    assert redact_text("use C++ or C.", ["C++", "  "]) == ("use [NAME] or C.", [Finding("name", 4, 7)])
    assert redact_text("a.b and axb", ["a.b"])[0] == "[NAME] and axb"


def test_bad_arguments_are_type_errors() -> None:
    """A non-string text, or one string passed as the entity list, is refused rather than misread."""
    with pytest.raises(TypeError):
        redact_text(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        redact_text("text", "Mirabel")


# -- planted secrets (property) ---------------------------------------------------------------------------------------

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"
STOP = {"password", "passwd", "secret", "token", "bearer", "authorization", "apikey", "pwd", "passphrase"}
STOP |= {part.casefold() for name in ENTITIES for part in name.split()}
NUMERIC_WORDS = [
    "2024",
    "1999",
    "2024-01-15",
    "15.01.2024",
    "01/15/2024",
    "12:30",
    "12:30:45",
    "3.11.7",
    "v1.2.3",
    "10.0.19041.1",
    "42",
    "1234567",
    "550e8400-e29b-41d4-a716-446655440000",
]

Plant = tuple[str, str, list[str]]  # as planted, as it must come out, the values that must not survive


def _chars(rng: random.Random, n: int, alphabet: str, must: str = string.digits) -> str:
    while True:
        s = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c in must for c in s):
            return s


def _luhn_complete(body: str) -> str:
    for check in string.digits:
        if luhn_ok(body + check):
            return body + check
    raise AssertionError("unreachable")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def plant_email(rng: random.Random) -> Plant:
    local = (
        rng.choice(["", "x."]) + "".join(rng.choice(string.ascii_lowercase) for _ in range(6)) + str(rng.randrange(99))
    )
    domain = "".join(rng.choice(string.ascii_lowercase) for _ in range(7)) + rng.choice(
        [".com", ".org", ".co.uk", ".io"]
    )
    return f"{local}@{domain}", "[EMAIL]", [local + "@", "@" + domain]


def plant_phone(rng: random.Random) -> Plant:
    def d(n: int) -> str:
        return "".join(rng.choice(string.digits) for _ in range(n))

    templates: list[Callable[[], str]] = [
        lambda: f"+{rng.randint(1, 99)} {d(3)} {d(3)} {d(4)}",
        lambda: f"+{rng.randint(1, 99)}-{d(3)}-{d(3)}-{d(4)}",
        lambda: f"+44 20 {d(4)} {d(4)}",
        lambda: f"+33 6 {d(2)} {d(2)} {d(2)} {d(2)}",
        lambda: f"+1 ({d(3)}) {d(3)}-{d(4)}",
        lambda: f"({d(3)}) {d(3)}-{d(4)}",
        lambda: f"{d(3)}-{d(3)}-{d(4)}",
        lambda: f"{d(3)}.{d(3)}.{d(4)}",
        lambda: f"{d(3)}-{d(4)}",
        lambda: f"0{d(2)} {d(4)} {d(4)}",
        lambda: f"0{rng.randint(1, 9)} {d(2)} {d(2)} {d(2)} {d(2)}",
    ]
    phone = rng.choice(templates)()
    return phone, "[PHONE]", [phone]


def plant_card(rng: random.Random) -> Plant:
    prefix, length = rng.choice([("4", 16), ("51", 16), ("55", 16), ("6011", 16), ("34", 15), ("37", 15)])
    digits = _luhn_complete(prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1)))
    sep = rng.choice(["", " ", "-"])
    cuts = (4, 10) if length == 15 else (4, 8, 12)
    groups = [digits[a:b] for a, b in zip((0, *cuts), (*cuts, length), strict=True)]
    return sep.join(groups), "[CARD]", [digits, sep.join(groups)]


def plant_ip(rng: random.Random) -> Plant:
    ip = ".".join(str(rng.randrange(256)) for _ in range(4))
    return ip, "[IP]", [ip]


def plant_token(rng: random.Random) -> Plant:
    kind = rng.randrange(12)
    if kind == 0:
        s = rng.choice(["AKIA", "ASIA"]) + _chars(rng, 16, string.ascii_uppercase + string.digits)
    elif kind == 1:
        s = rng.choice(["ghp_", "gho_", "ghs_"]) + _chars(rng, 36, ALNUM)
    elif kind == 2:
        s = "github_pat_" + _chars(rng, 22, ALNUM) + "_" + _chars(rng, 59, ALNUM)
    elif kind == 3:
        s = rng.choice(["sk-", "sk-proj-", "sk-ant-api03-"]) + _chars(rng, 48, ALNUM)
    elif kind == 4:
        s = f"xox{rng.choice('abpr')}-{_chars(rng, 11, string.digits)}-{_chars(rng, 24, ALNUM)}"
    elif kind == 5:
        s = "AIza" + _chars(rng, 35, B64URL)
    elif kind == 6:
        header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = _b64url(json.dumps({"sub": _chars(rng, 8, ALNUM), "iat": rng.randrange(10**9)}).encode())
        s = f"{header}.{body}.{_b64url(rng.randbytes(32))}"
    elif kind == 7:
        lines = [base64.b64encode(rng.randbytes(48)).decode() for _ in range(rng.randint(1, 4))]
        label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY"])
        block = f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"
        return block, "[SECRET]", lines
    elif kind == 8:
        token = _chars(rng, 40, B64URL + ".~")
        return f"Authorization: Bearer {token}", "Authorization: Bearer [SECRET]", [token]
    elif kind == 9:
        key = rng.choice(["password=", "passwd: ", "secret: ", "api_key=", "token=", "DB_PASSWORD="])
        value = _chars(rng, 12, ALNUM + "!#$%*")
        if rng.random() < 0.3:
            value = value[:6] + " " + value[6:]
            return f'{key}"{value}"', f'{key}"[SECRET]"', value.split()
        return key + value, key + "[SECRET]", [value]
    elif kind == 10:
        while True:
            s = "".join(rng.choice("0123456789abcdef") for _ in range(rng.choice([32, 40, 64])))
            if shannon_bits(s) >= HEX_ENTROPY_MIN_BITS and not s.isdigit() and any(c.isdigit() for c in s):
                break
    else:
        while True:
            s = base64.b64encode(rng.randbytes(rng.choice([24, 30, 33]))).decode()
            if shannon_bits(s.rstrip("=")) >= BASE64_ENTROPY_MIN_BITS and any(c.isdigit() for c in s):
                break
    return s, "[SECRET]", [s]


def plant_name(rng: random.Random) -> Plant:
    name = rng.choice(ENTITIES)
    name = rng.choice([name, name.lower(), name.upper(), name.title()])
    return name, "[NAME]", [name]


PLANTERS = [plant_email, plant_phone, plant_card, plant_ip, plant_token, plant_name]


def word(rng: random.Random) -> str:
    while True:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 9)))
        if w not in STOP:
            return w


def planted_text(seed: int) -> tuple[str, str, list[str], list[str], list[str]]:
    """Seeded words interleaved with planted secrets: (text, expected output, secrets, kept words, planted kinds)."""
    rng = random.Random(seed)
    chunks: list[str] = []
    expected: list[str] = []
    secrets: list[str] = []
    kept: list[str] = []
    kinds: list[str] = []
    for _ in range(rng.randint(1, 8)):
        phrase = [word(rng) for _ in range(rng.randint(1, 3))]
        if rng.random() < 0.4:  # a number that is not a secret, between words
            phrase[1:1] = [rng.choice(NUMERIC_WORDS), word(rng)]
        chunks += phrase
        expected += phrase
        kept += phrase
        planter = rng.choice(PLANTERS)
        planted, redacted, values = planter(rng)
        chunks.append(planted)
        expected.append(redacted)
        secrets += values
        kinds.append(planter.__name__.removeprefix("plant_"))
    tail = word(rng)
    return " ".join([*chunks, tail]), " ".join([*expected, tail]), secrets, [*kept, tail], kinds


KIND_OF_PLANTER = {"email": "email", "phone": "phone", "card": "card", "ip": "ip", "token": "secret", "name": "name"}


@settings(derandomize=True, max_examples=400, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_planted_secrets_never_survive_and_words_always_do(seed: int) -> None:
    """Across seeded texts of random words and planted secrets of every kind, each secret becomes its placeholder,
    nothing of it survives, and every other word comes out unchanged, in place."""
    text, expected, secrets, kept, kinds = planted_text(seed)
    out, findings = redact_text(text, ENTITIES)
    for s in secrets:
        assert s.casefold() not in out.casefold(), f"seed {seed}: {s!r} survived"
    assert set(kept) <= set(out.split())
    assert out == expected, f"seed {seed}"
    assert [f.kind for f in findings] == [KIND_OF_PLANTER[k] for k in kinds]
    check_spans(text, out, findings)


def test_every_planter_is_exercised() -> None:
    """The property above sees every kind of planted secret, so none goes untested (seeds 0..399)."""
    seen = {k for seed in range(400) for k in planted_text(seed)[4]}
    assert seen == set(KIND_OF_PLANTER)


# -- idempotence, determinism, spans ----------------------------------------------------------------------------------

FUZZ_ALPHABET = "0123456789 +-.()[]@:/=_\"'\n#aAbeEILMNOPSTRCHxyzkK"
FUZZ_ENTITIES = ("name", "Mirabel", "secret", "1 2")


@settings(derandomize=True, max_examples=600, deadline=None)
@given(text=st.text(alphabet=FUZZ_ALPHABET, max_size=60) | st.text(max_size=40))
def test_redaction_is_idempotent_and_spans_are_original(text: str) -> None:
    """Redacting redacted output changes nothing and finds nothing; findings rebuild the output from the input."""
    out, findings = redact_text(text, FUZZ_ENTITIES)
    check_spans(text, out, findings)
    assert redact_text(out, FUZZ_ENTITIES) == (out, [])


@settings(derandomize=True, max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_planted_texts_are_idempotent_and_deterministic(seed: int) -> None:
    """The same input gives the same output and findings, and redacting that output again is a no-op."""
    text = planted_text(seed)[0]
    first = redact_text(text, ENTITIES)
    assert redact_text(text, tuple(reversed(ENTITIES))) == first
    assert redact_text(first[0], ENTITIES) == (first[0], [])


def test_literal_placeholders_are_kept() -> None:
    """Placeholders already in the text are not redacted again, even when an entity or assignment would match."""
    text = "[EMAIL] password=[SECRET] [NAME]"
    assert redact_text(text, ["name", "email"]) == (text, [])


def test_findings_point_at_the_removed_text() -> None:
    """Each finding's span in the original text is exactly what its placeholder replaced."""
    text = "Mirabel: alice@example.com, +1 555 123 4567, 10.0.0.1, password=hunter2"
    out, findings = redact_text(text, ENTITIES)
    assert out == "[NAME]: [EMAIL], [PHONE], [IP], password=[SECRET]"
    assert [(f.kind, text[f.start : f.end]) for f in findings] == [
        ("name", "Mirabel"),
        ("email", "alice@example.com"),
        ("phone", "+1 555 123 4567"),
        ("ip", "10.0.0.1"),
        ("secret", "hunter2"),
    ]


# -- JSON values ------------------------------------------------------------------------------------------------------


def test_redact_json_values_keys_and_paths() -> None:
    """Strings at every depth are redacted, keys too (collisions numbered), with RFC 6901 paths and no original text."""
    value = {
        "text": "mail alice@example.com",
        "contacts": {"bob@example.org": "+44 20 7946 0958", "carol@example.org": "ok", "[EMAIL]": "kept"},
        "a/b": ["10.0.0.1", 3.5, None, True, 7, ("Mirabel",)],
        "card": 4111111111111111,
    }
    out, findings = redact_json(value, ENTITIES)
    assert out == {
        "text": "mail [EMAIL]",
        "contacts": {"[EMAIL]": "kept", "[EMAIL]#2": "[PHONE]", "[EMAIL]#3": "ok"},
        "a/b": ["[IP]", 3.5, None, True, 7, ["[NAME]"]],
        "card": "[CARD]",
    }
    assert set(findings) == {
        JsonFinding("/text", "email", 5, 22),
        JsonFinding("/contacts/[EMAIL]#2", "email", 0, 15, in_key=True),
        JsonFinding("/contacts/[EMAIL]#2", "phone", 0, 16),
        JsonFinding("/contacts/[EMAIL]#3", "email", 0, 17, in_key=True),
        JsonFinding("/a~1b/0", "ip", 0, 8),
        JsonFinding("/a~1b/5/0", "name", 0, 7),
        JsonFinding("/card", "card", 0, 16),
    }
    assert value["text"] == "mail alice@example.com", "the input is not changed"
    assert redact_json(out, ENTITIES) == (out, []), "idempotent"


def test_redact_json_takes_frozen_payloads_and_returns_plain_values() -> None:
    """A frozen asset payload (FrozenDict, tuples) comes back as plain dicts and lists; a bare string works too."""
    out, _ = redact_json(FrozenDict({"xs": ("a", FrozenDict({"k": "v"}))}))
    assert type(out) is dict and type(out["xs"]) is list and type(out["xs"][1]) is dict
    assert redact_json("ip 10.0.0.1") == ("ip [IP]", [JsonFinding("", "ip", 3, 11)])


@pytest.mark.parametrize("bad", [{1: "x"}, {"k": b"bytes"}, {"k": {1, 2}}])
def test_redact_json_refuses_non_json(bad: Any) -> None:
    """Non-string keys and non-JSON values are type errors, not silently passed through."""
    with pytest.raises(TypeError):
        redact_json(bad)


# -- the redacted packet ----------------------------------------------------------------------------------------------


def make_asset(**kw: Any) -> Asset:
    base: dict[str, Any] = {
        "asset_type": "fact",
        "payload": {"text": "t"},
        "owner_id": "owner-1",
        "tenant_scope": "acme",
        "created_at": NOW,
        "privacy_scope": PrivacyScope.TENANT_PRIVATE,
        "inference_policy": InferencePolicy.PUBLIC_WITH_REDACTION,
    }
    base.update(kw)
    base.setdefault("id", content_id(base["asset_type"], base["owner_id"], base["tenant_scope"], base["payload"]))
    return Asset(**base)


def build(draft: dict[str, Any]) -> Asset:
    return Asset(
        id=content_id(draft["asset_type"], draft["owner_id"], draft["tenant_scope"], draft["payload"]), **draft
    )


def strings_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *strings_of(v)]]
    if isinstance(value, list):
        return [s for v in value for s in strings_of(v)]
    return []


def assert_absent(packet: Asset, secrets: list[str]) -> None:
    blob = packet.canonical_bytes()
    decoded = " ".join(strings_of(Asset.from_canonical(blob).to_dict())).casefold()
    for s in secrets:
        assert s.encode() not in blob and s.casefold() not in blob.decode().casefold(), f"{s!r} is in the packet"
        assert s.casefold() not in decoded, f"{s!r} is in the packet"


@settings(derandomize=True, max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_packet_holds_no_planted_secret_or_name(seed: int) -> None:
    """The packet's canonical encoding holds none of the planted secrets or entity names, in values, keys or fields."""
    text, _, secrets, _, _ = planted_text(seed)
    rng = random.Random(seed)
    email, _, email_parts = plant_email(rng)
    phone, _, _ = plant_phone(rng)
    source = make_asset(
        payload={"text": text, "contacts": {email: phone}, "notes": [text, {"deep": text}]},
        goal="follow up with Mirabel",
        tags=("mirabel", "work"),
        entities=ENTITIES,
    )
    packet = build(redacted_packet(source, NOW + SECOND))
    assert_absent(packet, [*secrets, *email_parts, phone, *ENTITIES])
    assert packet.payload["redacted"]["contacts"] == {"[EMAIL]": "[PHONE]"}
    assert packet.goal == "follow up with [NAME]"
    assert packet.tags == ("[NAME]", "redacted", "work")
    for f in packet.payload["findings"]:
        assert set(f) == {"kind", "path"} and f["kind"] in KINDS


def test_packet_fields() -> None:
    """The draft derives from the source, keeps its owner, scope and restrictions, and is public for inference only."""
    source = make_asset(
        asset_type="procedure",
        payload={"text": "ask Mirabel at mirabel@example.com"},
        entities=ENTITIES,
        tags=("ops",),
        policy_tags=("pii",),
        level=Level.L1,
        allowed_principals=("p1",),
        allowed_roles=("r1",),
        replication_policy=ReplicationPolicy.TENANT_NODES,
        training_policy=TrainingPolicy.TENANT_ONLY,
        export_policy=ExportPolicy.PROHIBITED,
        retention_policy=Retention(ttl_seconds=3600),
        valid_from=5,
        valid_to=9,
        segment="seg-1",
    )
    now = NOW + 10 * SECOND
    draft = redacted_packet(source, now)
    assert "id" not in draft and "signature" not in draft
    packet = build(draft)
    assert packet.payload["redacted"] == {"text": "ask [NAME] at [EMAIL]"}
    assert [dict(f) for f in packet.payload["findings"]] == [
        {"kind": "name", "path": "/text"},
        {"kind": "email", "path": "/text"},
    ]
    assert packet.derived_from == (source.id,)
    assert (packet.asset_type, packet.owner_id, packet.tenant_scope) == (source.asset_type, "owner-1", "acme")
    assert packet.inference_policy is InferencePolicy.PUBLIC_ALLOWED
    assert packet.privacy_scope is PrivacyScope.TENANT_PRIVATE
    assert (packet.allowed_principals, packet.allowed_roles) == (("p1",), ("r1",))
    assert packet.replication_policy is ReplicationPolicy.TENANT_NODES
    assert packet.training_policy is TrainingPolicy.TENANT_ONLY
    assert packet.export_policy is ExportPolicy.PROHIBITED
    assert packet.retention_policy == Retention(delete_at=NOW + 3600 * SECOND), "the source's ttl, as its absolute end"
    assert packet.entities == ()
    assert packet.tags == ("ops", "redacted") and packet.policy_tags == ("pii", "redacted")
    assert packet.level is Level.L1 and (packet.valid_from, packet.valid_to) == (5, 9)
    assert packet.created_at == packet.updated_at == now
    assert packet.creator is Creator.SYSTEM and packet.source is None and packet.version == 1
    assert redacted_packet(source, now) == draft, "deterministic"


def test_packet_entities_default_to_the_assets_own() -> None:
    """Without ``entities`` the source's own names are removed; an explicit list replaces them."""
    source = make_asset(payload={"text": "Mirabel and Ann"}, entities=("Mirabel",))
    assert redacted_packet(source, NOW)["payload"]["redacted"] == {"text": "[NAME] and Ann"}
    assert redacted_packet(source, NOW, entities=["Ann"])["payload"]["redacted"] == {"text": "Mirabel and [NAME]"}


def _deadline(a: Asset) -> int:
    r = a.retention_policy
    ends = [x for x in (r.delete_at, a.created_at + r.ttl_seconds * SECOND if r.ttl_seconds else 0) if x]
    return min(ends) if ends else 0


@settings(derandomize=True, max_examples=150, deadline=None)
@given(
    scope=st.sampled_from([s for s in PrivacyScope if s is not PrivacyScope.LOCAL_ONLY]),
    inference=st.sampled_from([InferencePolicy.PUBLIC_WITH_REDACTION, InferencePolicy.PUBLIC_ALLOWED]),
    replication=st.sampled_from(list(ReplicationPolicy)),
    training=st.sampled_from(list(TrainingPolicy)),
    export=st.sampled_from(list(ExportPolicy)),
    delete_at=st.sampled_from([0, NOW + 50 * SECOND, NOW + 5000 * SECOND]),
    ttl=st.sampled_from([0, 100, 10_000]),
    later=st.integers(0, 40),
)
def test_packet_never_widens_scope_or_restrictions(
    scope: PrivacyScope,
    inference: InferencePolicy,
    replication: ReplicationPolicy,
    training: TrainingPolicy,
    export: ExportPolicy,
    delete_at: int,
    ttl: int,
    later: int,
) -> None:
    """Scope, readers, replication, training, export and retention are never less restrictive than the source's."""
    source = make_asset(
        privacy_scope=scope,
        inference_policy=inference,
        replication_policy=replication,
        training_policy=training,
        export_policy=export,
        retention_policy=Retention(delete_at=delete_at, ttl_seconds=ttl),
        allowed_principals=("p1",),
    )
    packet = build(redacted_packet(source, NOW + later * SECOND))
    order: list[tuple[Any, Any, tuple[Any, ...]]] = [
        (packet.privacy_scope, source.privacy_scope, tuple(PrivacyScope)),
        (packet.replication_policy, source.replication_policy, tuple(ReplicationPolicy)),
        (packet.training_policy, source.training_policy, tuple(TrainingPolicy)),
        (packet.export_policy, source.export_policy, tuple(ExportPolicy)),
    ]
    for got, was, narrow_first in order:
        assert narrow_first.index(got) <= narrow_first.index(was)
    assert set(packet.allowed_principals) <= set(source.allowed_principals)
    assert set(packet.allowed_roles) <= set(source.allowed_roles)
    assert set(source.policy_tags) <= set(packet.policy_tags)
    if _deadline(source):
        assert 0 < _deadline(packet) <= _deadline(source)
    else:
        assert _deadline(packet) == 0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tombstone": True}, "deleted"),
        ({"privacy_scope": PrivacyScope.LOCAL_ONLY}, "local_only memory"),
        ({"inference_policy": InferencePolicy.LOCAL_ONLY}, "inference policy local_only"),
        ({"inference_policy": InferencePolicy.PRIVATE_NODES}, "inference policy private_nodes"),
        ({"retention_policy": Retention(delete_at=NOW + 1)}, "past its retention"),
        ({"retention_policy": Retention(ttl_seconds=1)}, "past its retention"),
    ],
)
def test_packet_refused(changes: dict[str, Any], message: str) -> None:
    """No packet for deleted, expired or local-only memory, nor for memory whose inference policy keeps it private."""
    with pytest.raises(RedactionRefused, match=message):
        redacted_packet(make_asset(**changes), NOW + SECOND)


def test_packet_rejects_a_bad_time() -> None:
    """``now`` is a non-negative integer of microseconds."""
    with pytest.raises(ValueError, match="now"):
        redacted_packet(make_asset(), -1)
