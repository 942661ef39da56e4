"""Text normalisation shared by hashing, the offline embedder and content de-duplication."""

from __future__ import annotations

import hashlib
import json
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import lru_cache, wraps
from typing import ParamSpec, Protocol, TypeVar

_WHITESPACE = re.compile(r"\s+")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# A word of a query, with the parts an apostrophe joins to it ("what's", "don't", "O'Brien's"): English
# clitics are read in ``query_word_tokens``, not left as words of their own.
_QUERY_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*", re.UNICODE)
_APOSTROPHE = re.compile("['’]")
# What an apostrophe adds to a word that is not a word itself: "Bob's", "what's", "we'll", "they're",
# "I've", "I'd", "I'm". Split off as letters, a query's would match every memory that has one of them:
# "what's the weather forecast?" found "Bob's laptop runs Ubuntu" by its "s".
_CLITICS = frozenset({"s", "ll", "re", "ve", "d", "m"})

# Function words that carry no topic; dropped from lexical features (BM25 does its own).
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have
    having he her here hers herself him himself his how i if in into is it its itself just me more most
    my myself no nor not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves also get got let us ok okay yes yeah
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def normalize_content(content: str) -> str:
    """Canonical form for "the same content": Unicode NFC, trimmed, runs of whitespace collapsed."""
    return _WHITESPACE.sub(" ", unicodedata.normalize("NFC", content)).strip()


def content_hash(content: str) -> str:
    return hashlib.sha256(normalize_content(content).encode("utf-8")).hexdigest()


def is_unsafe_char(char: str) -> bool:
    """Control, format-less separators and line breaks (including U+0085, U+2028, U+2029)."""
    return unicodedata.category(char) in {"Cc", "Cs", "Co", "Cn", "Zl", "Zp"}


# Bidirectional controls (embeddings, overrides, isolates, marks) and Unicode tag characters (invisible
# shadows of ASCII): shown escaped, never raw, in a context.
_HIDDEN = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\U000e0000-\U000e007f]")


def escape_hidden(text: str) -> str:
    """``text`` with each bidirectional control and tag character written as ``<U+202E>``: stored text
    cannot reorder what the reader of a context sees, nor hide text in it."""
    return _HIDDEN.sub(lambda found: f"<U+{ord(found.group()):04X}>", text)


# Control characters (C0 and C1, but tab and newline: an escape sequence recolours a terminal or moves its
# cursor, a bell rings, a carriage return hides what came before it on the line) and zero-width spaces,
# word joiners and byte-order marks (text that looks like nothing, or like one word): shown escaped too.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u2060\ufeff]")


def shown_safely(text: str) -> str:
    """``text`` as a context or a terminal shows it: ``escape_hidden``, and every control character and
    zero-width space written the same way (``<U+001B>``); a Windows line end is a line end."""
    text = text.replace("\r\n", "\n")
    return escape_hidden(_CONTROL.sub(lambda found: f"<U+{ord(found.group()):04X}>", text))


def has_hidden(text: str) -> bool:
    """Whether ``text`` holds a bidirectional control or a tag character."""
    return _HIDDEN.search(text) is not None


def quoted_field(value: object) -> str:
    """A writer-supplied value (an agent id, tags, a title) as a JSON string or list, bidi controls
    escaped: in a header line nothing a writer chose can pass for the server's own words."""
    return shown_safely(json.dumps(value, ensure_ascii=False))


def single_line(text: str) -> str:
    """``text`` with every control character and line break replaced by a space."""
    if text.isprintable():  # False for every unsafe category (and a few safe ones): most text stops here
        return text
    return "".join(" " if is_unsafe_char(char) else char for char in text)


def wording(text: str) -> int:
    """A key of ``text``'s words in their order, case and punctuation aside: restatements that differ only
    in those share it, while "Bob reports to Alice" and "Alice reports to Bob" do not (their SimHash
    fingerprints, a bag of words, are the same). A process's own key (Python's string hash)."""
    return hash(tuple(word_tokens(text)))


def without_words_of(text: str, sources: Sequence[str], mark: str = "[purged]") -> str:
    """``text`` with each word that also appears in one of ``sources`` (stop words apart) replaced by
    ``mark``: a purge's own reason keeps its why ("leaked by the deploy bot") but not what it quotes of the
    memories it erases ("leaked hunter2")."""
    quoted = {word for source in sources for word in word_tokens(source)} - STOPWORDS
    if not quoted:
        return text
    return _WORD.sub(
        lambda found: (
            mark if unicodedata.normalize("NFKC", found.group(0)).lower() in quoted else found.group(0)
        ),
        text,
    )


# A date joined by hyphens, dots or slashes, year first or last.
_DATES = (
    re.compile(r"(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})"),
    re.compile(r"(\d{1,2})[-/.](\d{1,2})[-/.](\d{4})"),
)


def one_date_spelling(value: str) -> str | None:
    """``value`` as one spelling of a date ("2026-3-11" for "2026/03/11", "2026.03.11" or "2026-03-11"),
    when it is one; None otherwise. A date reads the same however it is joined; other joined values keep
    their joints ("12-16", a range, is not "12.16", a version: a review)."""
    for date in _DATES:
        if found := date.fullmatch(value):
            return "-".join(str(int(group)) for group in found.groups())
    return None


# A number written with thousands separators ("10,000", "1,500,000"): 1-3 digits, then groups of exactly three
# after commas, not inside a longer run of digits and commas. It is read as one number when a group after the
# first starts with 0 ("10,000", "2,050") or a word that is not a small word follows it ("1,500 entries"): a
# list of values written with commas ("listens on 80,443", "HTTP 500,502,503", "PIDs 123,456") is none.
_THOUSANDS = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?![\d]|,\d)")
_GROUP_FROM_ZERO = re.compile(r",0")
_NOUN_AFTER = re.compile(
    r"\s++(?!(?:and|or|nor|to|for|in|on|at|is|are|was|were|of|with|by|as|but|then|than|from)\b)[A-Za-z]",
    re.IGNORECASE,
)
_LIST_BEFORE = re.compile(r"\b(?:ports?|codes?|ids?|pids?|expose)\s*+[:=]?\s*+\Z", re.IGNORECASE)


def plain_thousands(text: str) -> str:
    """``text`` with each number written with thousands separators written without them: "10,000 MB" is
    "10000 MB", so a value change reads one value where it read "10" and "000" (a trial: "The cache holds
    1,500 entries" then "... 2,000 entries" stood side by side, neither read as a change)."""
    if "," not in text:
        return text

    def one_number(found: re.Match[str]) -> str:
        number = found.group(0)
        if _LIST_BEFORE.search(text, max(0, found.start() - 12), found.start()):
            return number
        if _GROUP_FROM_ZERO.search(number) or _NOUN_AFTER.match(text, found.end()):
            return number.replace(",", "")
        return number

    return _THOUSANDS.sub(one_number, text)


# A reference a note carries beside what it says: "(note 1)", "(ticket OPS-12)", "(see JIRA-4411)", "(#123)",
# "[PR #45]", or a last clause ", see OPS-12". Its number names the note, not a value of the fact: two notes
# that differ in their value and their reference differ in one value (a trial: "... port 1111 in staging
# (note 1)" and "... port 2222 ... (note 2)" were kept apart, undisputed). A key alone in parentheses is a
# value ("(AES-256)", "(GPT-4)", "(US-1)"), as are a number ("(8080)") and a joined name ("(eu-west-1)").
_REFERENCE_WORD = r"(?i:note|notes|ticket|issue|bug|pr|mr|pull\s+request|incident|jira)"
_SEE = r"(?i:see|ref|refs|cf\.?)\s++"
_NUMBERED = r"#\s?\d++"  # "#123"
_KEY = r"[A-Z][A-Z0-9]+-\d++"  # "OPS-12", "JIRA-4411": a reference only after a word that says so
_REFERENCE = re.compile(  # (tried from the start of a run of spaces only, possessive: linear on long runs)
    rf"(?<!\s)\s*+[(\[]\s*+(?:(?:{_SEE})?{_REFERENCE_WORD}\.?[\s-]*+(?:{_NUMBERED}|{_KEY}|\d++)|(?:{_SEE})?{_NUMBERED}"
    rf"|{_SEE}{_KEY})\s*+[)\]]"
    rf"|(?<![\s,;])[,;]?+\s++{_SEE}(?:{_REFERENCE_WORD}\.?\s*+)?(?:{_NUMBERED}|{_KEY})\.?\s*+$"
)


# The days and months by name, a word's whole (``retrieval.contradictions`` reads them as values).
CALENDAR_NAMES = (
    r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|june|july|"
    r"august|september|october|november|december)s?"
)
CALENDAR_WORD = re.compile(rf"{CALENDAR_NAMES}\Z", re.IGNORECASE)


# Who said it, beside what it says: "(per Dana)", "(per Dana, 2026-03)", "(according to the SRE team)",
# ", per @dkim", "Per Dana, ...", "... - Dana". It names a source, not a value of the fact: "The timeout is
# now 30 seconds (per Dana)" says what "The timeout is now 30 seconds" does (a trial: a change with its
# source named was linked to nothing, the older value recalled first, unmarked). Only after "per" or
# "according to" with a name, a handle or "the ... team" ("(per second)" is a unit), or a name alone after a
# dash at the end.
# Not a source: what a rate or a limit is counted by ("(per User)", "Per Node, ..."), nor a day or month
# ("Tuesday - Thursday" is a range), whatever its capital (a review).
_COUNTED_BY = (
    r"(?i:users?|tenants?|pods?|nodes?|seats?|hosts?|instances?|regions?|zones?|namespaces?|clusters?|"
    r"accounts?|orgs?|organi[sz]ations?|projects?|services?|customers?|clients?|devices?|ips?|keys?|tokens?|"
    r"requests?|calls?|connections?|sessions?|jobs?|workers?|cores?|cpus?|gpus?|containers?|deployments?|"
    r"environments?|envs?|tables?|databases?|quer(?:y|ies)|units?|items?|pages?|files?|records?|rows?|"
    r"events?|messages?|routes?|endpoints?|shards?|partitions?|topics?|teams?|apps?|repos?|builds?|"
    rf"seconds?|minutes?|hours?|days?|weeks?|months?|quarters?|years?|{CALENDAR_NAMES}|may)\b"
)
_SOURCE_NAME = (
    rf"(?:@[\w.-]++|(?!{_COUNTED_BY})[A-Z][a-z][\w'-]*+(?:\s++[A-Z][a-z][\w'-]*+)?+"
    r"|the\s++(?:[\w-]+\s+){1,2}?team\b)"
)
_ATTRIBUTED = rf"(?i:per|according\s++to)\s++{_SOURCE_NAME}"
# What may follow the source: when it was said ("2026-03", "March 2026"), nothing else ("(per Dana, not
# 8080)" names the value given up, a review).
_WHEN_SAID = r"(?:\d{4}(?:[-/]\d{1,2}){0,2}|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*+\.?(?:\s++\d{1,4}){0,2})"
_ATTRIBUTION = re.compile(
    rf"(?<!\s)\s*+[(\[]\s*+{_ATTRIBUTED}(?:\s*+[,;]\s*+{_WHEN_SAID})?\s*+[)\]]"  # "(per Dana, 2026-03)"
    rf"|(?<=\S)\s*+[,;]\s*+{_ATTRIBUTED}(?:\s*+\(\s*+{_WHEN_SAID}\s*+\))?(?=\s*+[.!]?\s*+$)"  # ", per Dana (2026-03)"
    rf"|^\s*+{_ATTRIBUTED}\s*+,\s*+"  # "Per Dana, ..."
    rf"|(?<=\S)\s++[-\u2013\u2014]\s++{_SOURCE_NAME}(?=\s*+\.?\s*+$)"  # "... - Dana"
)


def without_references(text: str) -> str:
    """``text`` without the references it carries beside what it says (``_REFERENCE``), nor who it says
    it (``_ATTRIBUTION``)."""
    return _ATTRIBUTION.sub("", _REFERENCE.sub("", text))


def word_tokens(text: str) -> list[str]:
    """Lower-cased letter/digit runs after NFKC folding (so "Ｐｏｓｔｇｒｅｓ" == "postgres")."""
    return _WORD.findall(unicodedata.normalize("NFKC", text).lower())


# A number however written, alone or joined ("1.2", "v1.2", "09:00", "30s", "10.0.1.2"): ``numbers`` reads it.
_NUMBER_PART = re.compile(r"v?\d+[a-z]{0,2}\Z", re.IGNORECASE)
# An identifier: letters or digits joined by a dot, slash, "@", colon or underscore, or by a hyphen with a
# digit somewhere ("ash.internal", "cmd/api", "/var/log/app", "https://ash.internal/hook", "ops@acme.io",
# "job_queue", "alice-node-8"); not a hyphenated word ("on-call", "read-only"), nor an abbreviation of
# single letters ("e.g", "U.S").
_IDENTIFIER = re.compile(
    r"(?<![\w./@:\-])(?:[a-z][a-z0-9+.\-]{0,31}://)?/?[^\W_]+(?:[./@:_\-]+[^\W_]+)+", re.IGNORECASE
)
# A word written with a capital inside a sentence: after a space that follows neither a sentence's end, a
# line's start, a list's mark or number, a heading's or a table's mark, nor a closing bracket.
_CAPITALISED = re.compile(r"(?<=[^\s.!?:\-\u2013\u2014\u2022*)#|\]>0-9])[ \t]+([A-Z][^\W_]*)")


def names_in(text: str) -> frozenset[str]:
    """The names and identifiers ``text`` states, lower-cased: identifiers (``_IDENTIFIER``) and words
    written with a capital inside a sentence ("owned by Priya", "runs on Postgres"), not a function word
    nor "I"; not numbers, days or months (values, read as such). Two memories that name different ones
    say different things, however alike their other words (a team's trial: "... runs on host
    ash.internal" was folded into "... runs on host oak.internal", and "owned by Priya" into "owned by
    Marco", as one claim stated by both agents)."""
    written = unicodedata.normalize("NFKC", text)
    found = {
        token.lower()
        for token in _IDENTIFIER.findall(written)
        if (any(joint in token for joint in "./@:_") or any(char.isdigit() for char in token))
        and max(len(part) for part in _WORD.findall(token)) > 1  # not "e.g"
        and not all(_NUMBER_PART.match(part) for part in _WORD.findall(token))  # a number's, not a name's
    }
    found.update(
        word.lower()
        for word in _CAPITALISED.findall(written)
        if word != "I" and word.lower() not in STOPWORDS and not CALENDAR_WORD.match(word)  # a value's
    )
    return frozenset(found)


def names_present(names: frozenset[str], text: str) -> bool:
    """Whether each of ``names`` (``names_in`` of another text) is said in ``text`` as a word, written
    with a capital or not ("the api" says the "API" of another), or by all its parts ("alice node 8")."""
    words = set(word_tokens(text))
    lowered = unicodedata.normalize("NFKC", text).lower()
    for name in names:
        if name in words or re.search(rf"(?<![\w.@/:-]){re.escape(name)}(?![\w@/-]|[.:][\w])", lowered):
            continue
        if not set(_WORD.findall(name)) <= words:
            return False
    return True


def query_word_tokens(query: str) -> list[str]:
    """``word_tokens`` of a query, whose English clitics match nothing: a word's clitic goes ("Bob's" ->
    "bob", "what's" -> "what", "we'll" -> "we"), and a negative contraction reads "not" ("don't", "isn't":
    the verb before it is a function word); other words an apostrophe joins are its parts ("O'Brien's" ->
    "o", "brien").

    Memories keep their clitics as words (``word_tokens``): only the query's are the trouble, and there
    they count for length. On LoCoMo, memories read without them ranked the offline backend's held-out
    evidence 0.013 lower at R@5: short chit-chat full of "don't" and "that's" rose (docs/retrieval.md)."""
    tokens: list[str] = []
    for word in _QUERY_WORD.findall(unicodedata.normalize("NFKC", query).lower()):
        if "'" not in word and "’" not in word:
            tokens.append(word)
            continue
        parts = _APOSTROPHE.split(word)
        while len(parts) > 1 and parts[-1] in _CLITICS:  # "I'd've": both go
            parts.pop()
        if len(parts) == 2 and parts[1] == "t" and len(parts[0]) > 1 and parts[0].endswith("n"):
            tokens.append("not")  # "shouldn't", "shouldn't've"
        else:
            tokens += parts
    return tokens


@lru_cache(maxsize=65_536)
def light_stem(token: str) -> str:
    """A conservative suffix stripper: plural and common verb endings, nothing clever."""
    if len(token) <= 3 or not token.isalpha():
        return token
    for suffix, replacement, min_stem in (
        ("ies", "y", 2),
        ("sses", "ss", 2),
        ("ing", "", 3),
        ("ed", "", 3),
        ("es", "", 3),
        ("s", "", 3),
    ):
        if token.endswith(suffix) and len(token) - len(suffix) >= min_stem:
            if suffix == "s" and token.endswith(("ss", "us", "is")):
                return token
            if suffix == "es" and not token.endswith(("ches", "shes", "xes", "zes", "sses")):
                continue
            stem = token[: len(token) - len(suffix)] + replacement
            if suffix in ("ing", "ed") and len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                stem = stem[:-1]  # running -> run, stopped -> stop
            return stem
    return token


def content_words(text: str, *, query: bool = False) -> list[str]:
    """The words of ``text`` (a ``query``'s: ``query_word_tokens``) without function words; all its words
    when nothing else is left."""
    words = query_word_tokens(text) if query else word_tokens(text)
    return [word for word in words if word not in STOPWORDS] or words


_STEMMERS = threading.local()  # a Snowball stemmer keeps state on itself: one per thread


@lru_cache(maxsize=131_072)
def porter2_stem(word: str) -> str:
    """Snowball's English (Porter2) stem, the stemmer of LanceDB's own full-text index. Numbers, codes and
    words of one or two letters are left as they are (Porter2 would not change them either)."""
    if len(word) <= 2 or not word.isalpha():
        return word
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        import snowballstemmer  # type: ignore[import-untyped]

        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def plural(noun: str) -> str:
    """A regular noun's plural: "memory" -> "memories", "tag" -> "tags", "delivery" -> "deliveries"."""
    return noun[:-1] + "ies" if re.search(r"[^aeiou]y$", noun) else noun + "s"


# Irregular verb forms, read as their verb before stemming: Porter2 strips suffixes, so "went" never met
# "go" nor "bought" "buy", and a question asks with the verb's base ("When did she go to ...?") what the
# memory tells in its past ("I went to ..."). Only forms that are rarely another word of their own: not
# "left" (a side), "made" (GNU make), "found" ("not found"), "known" ("known issue"), "built" ("built-in"),
# "driven" ("event-driven"), "spoke" ("hub and spoke"), nor "ran", "won", "sang", "sung" or "drew" (names).
_IRREGULAR_VERBS = {
    "become": "became",
    "begin": "began begun",
    "break": "broke broken",
    "bring": "brought",
    "buy": "bought",
    "catch": "caught",
    "choose": "chose chosen",
    "come": "came",
    "drink": "drank drunk",
    "drive": "drove",
    "eat": "ate eaten",
    "fall": "fell fallen",
    "feel": "felt",
    "fight": "fought",
    "fly": "flew flown",
    "forget": "forgot forgotten",
    "give": "gave given",
    "go": "went gone",
    "grow": "grew grown",
    "hear": "heard",
    "hold": "held",
    "keep": "kept",
    "know": "knew",
    "lose": "lost",
    "meet": "met",
    "pay": "paid",
    "ride": "rode ridden",
    "say": "said",
    "see": "saw seen",
    "sell": "sold",
    "send": "sent",
    "sleep": "slept",
    "speak": "spoken",
    "spend": "spent",
    "swim": "swam swum",
    "take": "took taken",
    "teach": "taught",
    "tell": "told",
    "think": "thought",
    "throw": "threw thrown",
    "understand": "understood",
    "wear": "wore worn",
    "write": "wrote written",
}
# Irregular plurals, read as their singular for the same reason ("How many children ..." against "my child").
_IRREGULAR_PLURALS = {
    "children": "child",
    "men": "man",
    "women": "woman",
    "feet": "foot",
    "teeth": "tooth",
    "mice": "mouse",
    "geese": "goose",
    "wives": "wife",
    "knives": "knife",
    "shelves": "shelf",
    "wolves": "wolf",
    "halves": "half",
    "thieves": "thief",
}
# Nouns of an action whose Porter2 stem is not their verb's ("decision" decis, "decide" decid), read as the
# verb word by word, so that "what did we decide" finds "Decision: ...". Word by word, not by stem: the stem
# would take the adjectives and agent nouns too ("exclusive", "inclusivity"). Left out, as nouns that are
# mostly something else: "maintenance" (Porter2 reads "maintainer" as "maintain"), "consumption" ("consumer"),
# "permission" (a "permit"), "denial" ("denial of service"), "division", "resolution".
_ACTION_NOUNS = {
    "decision": "decide",
    "conclusion": "conclude",
    "exclusion": "exclude",
    "inclusion": "include",
    "expansion": "expand",
    "submission": "submit",
    "omission": "omit",
    "description": "describe",
    "subscription": "subscribe",
    "assumption": "assume",
    "solution": "solve",
    "choice": "choose",
    "failure": "fail",
    "explanation": "explain",
    "delivery": "deliver",
    "retention": "retain",
    "recurrence": "recur",
    "reliance": "rely",
    "compliance": "comply",
}
# Every form above, with the plural of each action noun ("decisions", "deliveries").
_BASE_FORMS = (
    {form: verb for verb, forms in _IRREGULAR_VERBS.items() for form in forms.split()}
    | _IRREGULAR_PLURALS
    | _ACTION_NOUNS
    | {plural(noun): verb for noun, verb in _ACTION_NOUNS.items()}
)


# Each base word with its other forms: what a query for LanceDB's own full-text index (scopes beyond the
# copies, ``with_other_forms``) asks for besides the word it says.
_OTHER_FORMS = {
    base: tuple(form for form, its_base in _BASE_FORMS.items() if its_base == base)
    for base in set(_BASE_FORMS.values())
}


def with_other_forms(query: str) -> str:
    """``query`` with the other forms of each word ``index_term`` reads as one ("decide" adds "decision
    decisions", "went" adds "go gone"), for LanceDB's own full-text index, which stems without those
    readings: a scope searched there finds what a scope copy finds. A word is added once."""
    words = word_tokens(query)
    said = set(words)
    added: list[str] = []
    for word in words:
        base = _BASE_FORMS.get(word, word)
        for form in (base, *_OTHER_FORMS.get(base, ())):
            if form not in said:
                said.add(form)
                added.append(form)
    return f"{query} {' '.join(added)}" if added else query


def index_term(word: str) -> str:
    """One content word as the BM25 index holds it: its Porter2 stem, after reading an irregular verb form
    as its verb ("went" as "go"), an irregular plural as its singular ("children" as "child") and an action
    noun as its verb ("decision" as "decide")."""
    return porter2_stem(_BASE_FORMS.get(word, word))


def index_terms(text: str) -> list[str]:
    """What the scope copies' BM25 index holds for a text and looks up for a query: content words,
    Porter2-stemmed (as LanceDB's index stems; the lighter ``light_stem`` measured 0.009 lower R@5 on
    LoCoMo, 0.016 on the held-out conversations), with irregular verbs and action nouns read as their
    verb and irregular plurals as their singular (``index_term``)."""
    return [index_term(word) for word in content_words(text)]


def term_set(text: str) -> frozenset[str]:
    """A text's stemmed content words, as a set: what near-duplicate tests compare."""
    return frozenset(content_terms(text))


# Words that turn a statement into its opposite ("is not weekly", "never", "isn't", "without"). They are stop
# words, so "the rotation is weekly" and "the rotation is not weekly" have the same content words: a
# near-duplicate test also asks whether each text negates (``negated``). Whether, not how often:
# "neither staging nor prod uses Redis" restates "staging and prod do not use Redis". "no" before a number
# or a full stop is a number sign ("ticket no. 42").
_NEGATION = re.compile(
    r"\b(?:no\s+longer|not|no(?!\s*\.|\s*\d)|never|none|nothing|nobody|nowhere|neither|nor|cannot|without"
    r"|[^\W\d_]+n['’]t)\b",
    re.IGNORECASE,
)
# Words that only go with a negation ("does not run anymore", "not any more"): left out with it, so that
# "deploys no longer happen on Fridays" has the content words of "deploys happen on Fridays".
_WITH_NEGATION = re.compile(r"\b(?:any\s*more)\b", re.IGNORECASE)


def negation_sides(text: str) -> tuple[str, str] | None:
    """``text`` before and after its first negating word ("from main, not from the release branch": "from
    main, ", " from the release branch"); None when it negates nothing."""
    found = _NEGATION.search(text)
    return None if found is None else (text[: found.start()], text[found.end() :])


def negating_word(text: str) -> str | None:
    """The first negating word of ``text``, as written (lowercased), if any."""
    found = _NEGATION.search(text)
    return found.group(0).lower() if found else None


def without_negations(text: str) -> str:
    """``text`` with its negating words blanked ("isn't" would leave "isn" among its content words, "no
    longer" would leave "longer", "not ... anymore" "anymore")."""
    return _WITH_NEGATION.sub(" ", _NEGATION.sub(" ", text))


class _ClearableCache(Protocol):
    def cache_clear(self) -> None: ...


_Cache = TypeVar("_Cache", bound=_ClearableCache)
# The caches of this process keyed by memory text: a purge empties them all (``forget_cached_texts``).
_TEXT_CACHES: list[_ClearableCache] = []


def keyed_by_text(cache: _Cache) -> _Cache:
    """Register an ``lru_cache`` whose keys are memory texts, so that a purge empties it."""
    _TEXT_CACHES.append(cache)
    return cache


@keyed_by_text
@lru_cache(maxsize=8_192)
def negated(text: str) -> bool:
    """Whether ``text`` holds a negating word. Remembered: consolidation asks it of a write's neighbours,
    mostly the neighbours of the writes before it."""
    return _NEGATION.search(text) is not None


_purges = 0  # how often ``forget_cached_texts`` ran (``after_purges_forgotten`` compares)
_Params = ParamSpec("_Params")
_Result = TypeVar("_Result")


def forget_cached_texts() -> None:
    """Empty every cache keyed by memory text (a purged memory's text must not stay in this process)."""
    global _purges
    _purges += 1
    _empty_text_caches()


def _empty_text_caches() -> None:
    for cache in _TEXT_CACHES:
        cache.cache_clear()


def after_purges_forgotten(work: Callable[_Params, _Result]) -> Callable[_Params, _Result]:
    """Wrap ``work`` that puts texts it read from the store into these caches (a recall, a consolidation):
    a purge that ran meanwhile emptied the caches before the work's last reads of a text it had read before
    the purge, so they are emptied again when it ends (a review: a consolidation's neighbours' readings
    outlived their purge)."""

    @wraps(work)
    def run(*args: _Params.args, **kwargs: _Params.kwargs) -> _Result:
        purges = _purges
        try:
            return work(*args, **kwargs)
        finally:
            if _purges != purges:
                _empty_text_caches()

    return run


@keyed_by_text
@lru_cache(maxsize=32_768)
def cached_term_set(text: str) -> frozenset[str]:
    """``term_set``, remembered (the set is immutable) for assembly, which asks for every memory it places,
    recall after recall. Not for passes over a whole scope: they would only churn the cache."""
    return term_set(text)


def swapped_spans(left: str, right: str) -> tuple[str, str] | None:
    """The two short parts whose places ``right`` exchanges in ``left`` around the same words ("Deploys are
    allowed on Monday but not on Friday" / "... on Friday but not on Monday": ("monday", "friday"); "Alice
    reports to Bob" / "Bob reports to Alice"; "On the payments team Alice reports to Bob directly" / "On the
    payments team Bob reports to Alice"), or None. Such texts hold (nearly) the same words, so every test
    of word sets reads them as one statement, while they say the opposite (or, "Alice met Bob", the same:
    nothing here can tell which).

    Only within a clause: each part of at most ``SWAP_PART_WORDS`` words with a content word, at most
    ``SWAP_BETWEEN_WORDS`` words between them and no punctuation mark in or between them, so items of a
    list ("Alice, Bob, Carol"), sentences or clauses in another order ("...; use ruff for linting"), a
    speaker's name and the one addressed ("Joanna: Hey Nate!") are no swap; nor two parts with nothing
    between them ("We deploy on Tuesdays" / "On Tuesdays we deploy"), nor the two sides of "is" or "and"
    ("The staging database is Postgres 15" / "Postgres 15 is the staging database"). Words one text has and
    the other lacks are set aside first, when they are at most a fifth of its words."""
    return swapped_tokens(clause_tokens(left), clause_tokens(right))


def swapped_tokens(a: Sequence[str], b: Sequence[str]) -> tuple[str, str] | None:
    """``swapped_spans`` of two texts' ``clause_tokens`` (a caller comparing many pairs makes them once)."""
    if not a or not b or a == b or max(len(a), len(b)) > SWAP_MAX_WORDS:
        return None
    if min(len(a), len(b)) < 0.8 * max(len(a), len(b)):  # fewer than 80% of the words can be shared
        return None
    shared = Counter(a) & Counter(b)
    if sum(shared.values()) < 0.8 * max(len(a), len(b)):
        return None
    a, b = _kept(a, shared), _kept(b, shared)
    if a == b:
        return None
    start = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    end = len(a) - next(i for i, (x, y) in enumerate(zip(reversed(a), reversed(b), strict=True)) if x != y)
    first, second = a[start:end], b[start:end]
    size = end - start
    if size > 2 * SWAP_PART_WORDS + SWAP_BETWEEN_WORDS or any(token in _MARKS for token in first):
        return None
    for width in range(1, min(size, SWAP_PART_WORDS + 1)):  # the part of ``left`` that comes first
        head = first[:width]
        if second[size - width :] != head:
            continue
        for other in range(1, min(size - width, SWAP_PART_WORDS + 1)):  # the part that comes last
            tail = first[size - other :]
            between = first[width : size - other]
            exchanged = second[:other] == tail and between == second[other : size - width]
            if exchanged and _telling(head) and _telling(tail) and not set(between) <= SYMMETRIC_WORDS:
                return " ".join(head), " ".join(tail)
    return None


# Texts longer than this are never read as a swap; the parts exchanged are short, within one clause.
SWAP_MAX_WORDS = 200
SWAP_PART_WORDS = 4
SWAP_BETWEEN_WORDS = 6
_CLAUSE_TOKEN = re.compile(r"[^\W_]+|[.,;:!?()\[\]{}\u2013\u2014]", re.UNICODE)
_MARKS = frozenset(".,;:!?()[]{}\u2013\u2014")
# Words between two parts that say the same whichever part comes first ("A is B", "A and B", "A equals B").
SYMMETRIC_WORDS = frozenset(
    {
        "is",
        "are",
        "was",
        "were",
        "equals",
        "equal",
        "means",
        "and",
        "or",
        "the",
        "a",
        "an",
        "same",
        "as",
        "vs",
    }
)


def clause_tokens(text: str) -> list[str]:
    """``word_tokens`` with the punctuation marks that end a clause or separate items kept as tokens."""
    return _CLAUSE_TOKEN.findall(unicodedata.normalize("NFKC", text).lower())


def _kept(tokens: Sequence[str], shared: Counter[str]) -> list[str]:
    """``tokens`` in order, each kept as often as ``shared`` counts it (the first occurrences)."""
    left = Counter(shared)
    kept = []
    for token in tokens:
        if left[token] > 0:
            left[token] -= 1
            kept.append(token)
    return kept


def _telling(words: Sequence[str]) -> bool:
    return any(word not in STOPWORDS for word in words)


def set_jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    """|A & B| / |A | B| (1.0 for two empty sets)."""
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def content_terms(text: str, *, query: bool = False) -> list[str]:
    """Stemmed content words (stop words dropped; if nothing is left, the stemmed words themselves)."""
    return [light_stem(word) for word in content_words(text, query=query)]


PRECEDING_CHARS = 2_000


def searchable_text(
    content: str, tags: Sequence[str], agent_id: str, when: datetime, preceding: str | None = None
) -> str:
    """What the full-text index sees for a memory: its content, then its tags, who wrote it and the day
    it was learned ("8 May 2023"), then the memory before it in the same episode (its first
    ``PRECEDING_CHARS``). An answer seldom repeats the words of the question it answers ("Oscar, my
    guinea pig" after "Do you have pets?"), so the turn before it is searchable context for it."""
    context = [*tags, agent_id, f"{when.day} {when:%B %Y}"]
    text = content + "\n" + " ".join(context)
    return text + "\n" + preceding[:PRECEDING_CHARS] if preceding else text


def fulltext_query(query: str) -> str:
    """The words of ``query`` for the full-text leg: function words dropped ("what did Caroline research"
    -> "Caroline research"; the index's own stop list is short and keeps "what", "did", "you"), its
    clitics left out ("what's" -> "what"), and no query syntax passed through. The whole query's words
    when nothing else is left."""
    return " ".join(content_words(query, query=True))


def counted(count: int, singular: str) -> str:
    """``count`` and the noun agreeing with it: "1 memory", "2 memories", "0 memories", "3 tags"."""
    return f"{count:,} {singular if count == 1 else plural(singular)}"


def listed(values: Sequence[object], shown: int = 5) -> str:
    """The first ``shown`` of ``values``, comma-separated, and how many more: "a, b, c and 4 more"."""
    more = f" and {len(values) - shown} more" if len(values) > shown else ""
    return ", ".join(str(value) for value in values[:shown]) + more


# An episode's title, at most: its first line (its summary, when shown, follows in full).
TITLE_CHARS = 120


def clip_at_word(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters at a word, an ellipsis marking the cut (a trial read an episode's
    title "fixed by raising pool size to 5" whose summary said 50)."""
    if len(text) <= width:
        return text
    cut = text[: width - 1]
    return (cut.rsplit(None, 1)[0] if " " in cut.strip() else cut).rstrip(" ,;:") + "…"


def clip(text: str, width: int) -> str:
    """``text`` on one line of at most ``width`` characters (an ellipsis marks a cut)."""
    line = " ".join(str(text).split())
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


# Letters and symbols that render as nothing: the Hangul fillers, the blank braille pattern, the Khmer
# inherent vowels (a new user's trial stored "\u2800" and "\u3164" as memories).
BLANK_LOOKING = frozenset("\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
# Categories shown as nothing alone: controls, format characters, and marks that only change the character
# before them (variation selectors, the combining grapheme joiner, accents with nothing to sit on).
INVISIBLE = ("Cc", "Cf", "Mn", "Me")


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds a character that is neither white space, nor of the ``INVISIBLE`` categories,
    nor one of those that render as nothing (``BLANK_LOOKING``); stops at the first such character, almost
    always the first one."""
    return any(
        not char.isspace() and char not in BLANK_LOOKING and unicodedata.category(char) not in INVISIBLE
        for char in text
    )
