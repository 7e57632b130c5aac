"""Names in Latin script inside Russian text. Russian prose writes a foreign person in Cyrillic; what it leaves in Latin
is mostly a firm, a newspaper, a team or a network («Goldman Sachs», «Chicago Cubs», «The Daily Mail»). So two or
three capitalised Latin words are a person's name only when they open with a first name korpus knows or carry an
initial («Bob Marley», «Alf Karlsson», «Arley D. Cathey»); otherwise they are left to the organisation rules, which
want evidence (tasks/meta/org_evidence.py `has_organisation_evidence`)."""

from __future__ import annotations

import re

from tasks.meta.bodies import _LATIN_COMPANY, _LATIN_PERSON

# Common given names of the languages whose people a Russian archive names in Latin script (English, German, French,
# Italian, Spanish, Portuguese, Dutch, Scandinavian); short forms included. Written for korpus, not copied from a list.
FIRST_NAMES = frozenset(
    """
    Aaron Adam Adrian Alan Albert Alberto Alex Alexander Alexandre Alf Alfred Alfredo Alice Alison Amanda Amy
    Andrea Andreas Andrew Andy Angela Angelo Anita Ann Anna Anne Anders Antoine Anthony Anton Antonio Arne
    Arthur Astrid Barbara Ben Benjamin Bernard Bernd Bert Beth Betty Bill Billy Bob Bobby Brad Brian Bruce Bruno
    Bryan Carl Carla Carlos Carol Caroline Catherine Charles Charlie Charlotte Chris Christian Christina
    Christine Christopher Claire Claude Claudia Colin Craig Dan Daniel Daniela Danny Dave David Dennis Diana
    Diane Dieter Dirk Dominic Don Donald Doug Douglas Ed Eddie Edward Elena Elisabeth Elizabeth Ellen Emily Emma
    Enrique Eric Erik Erika Ernst Eva Felix Fernando Frank Franz Fred Frederick Friedrich Gary George Georg
    Gerald Gerard Gerhard Giovanni Giuseppe Glen Gordon Grace Greg Gregory Gunnar Hans Harald Harold Harry Heinz
    Helen Helga Henrik Henry Herbert Hugh Hugo Ian Ingrid Isabel Jack Jacob Jacques James Jan Jane Janet Jason
    Javier Jean Jeff Jeffrey Jennifer Jens Jeremy Jerry Jessica Jim Jimmy Joan Joe Johan Johann Johannes John
    Jon Jonathan Jorge Jose Joseph Josh Juan Judith Julia Julian Julie Jurgen Karen Karin Karl Kate Katherine
    Kathleen Kevin Klaus Kurt Lars Laura Lauren Laurent Leo Leon Linda Lisa Lorenzo Louis Louise Lucas Lucy
    Luigi Luis Lukas Marc Marco Margaret Maria Marie Mario Mark Markus Martin Mary Matt Matteo Matthew Matthias
    Max Michael Michel Michelle Miguel Mike Nancy Natalie Nick Nicholas Nicolas Nils Olaf Oliver Olivia Oscar
    Otto Owen Pablo Pamela Patricia Patrick Paul Paula Pedro Peter Philip Philippe Pierre Rachel Rafael Ralph
    Ray Raymond Rebecca Richard Rick Rita Rob Robert Roberto Robin Roger Roland Ronald Ronan Rosa Ruth Ryan Sam
    Samuel Sandra Sarah Scott Sean Sebastian Sergio Simon Sophie Stefan Stephen Steve Steven Susan Sven Thomas
    Tim Timothy Tom Tony Ulrich Ursula Victor Vincent Walter Wendy Werner Wilhelm William Wolfgang Yves
    """.split()
)
_WORDS = re.compile(r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?|[A-Z]\.")


def latin_person_like(span: str) -> bool:
    """Capitalised Latin words that read as a person: an initial before the last word («John R. Smith», «J. Smith»)
    or a known first name first («Bob Marley»)."""
    words = _WORDS.findall(span)
    if len(words) < 2:
        return False
    return any(w.endswith(".") for w in words[:-1]) or words[0] in FIRST_NAMES


def latin_person_span(span: str) -> bool:
    """An NER ORG span that is a person's Latin name (NER calls Latin-script names organisations): the shape of a
    name, read as a person (`latin_person_like`), and no company word («Bob Marley», not «Goldman Sachs Group»)."""
    return bool(_LATIN_PERSON.match(span)) and latin_person_like(span) and not _LATIN_COMPANY.search(span)


_PLACE_OR_PRODUCT = re.compile(  # «Konwiktorska Street», «Sky Digital», «Sky Box Office»: a place or a service
    r"\b(?:Street|Avenue|Road|Square|Lane|Boulevard|Stadium|Center|Centre|Bridge|Park|Digital|Demand|Office|Movies)\b"
)
_LATIN_NAME = re.compile(r"(?:The\s+)?[A-Z][\w&'’.-]*(?:[ \t]+(?:&[ \t]+)?[A-Z0-9][\w&'’.-]*){1,3}")


def latin_body(text: str, start: int, stop: int) -> bool:
    """An NER ORG span of two to four capitalised Latin words in Russian prose, not a person's name: a firm, a paper,
    a team («Goldman Sachs», «Chicago Cubs», «The Daily Mail»). Not in Latin-script text, where NER's ORG spans are
    anything capitalised («Visual Studio», «Machine Learning»)."""
    span = text[start:stop].strip()
    if not _LATIN_NAME.fullmatch(span) or latin_person_like(span) or _PLACE_OR_PRODUCT.search(span):
        return False
    if all(word.isupper() for word in re.findall(r"[A-Za-z]+", span)):
        return False  # «API POST»: code words; an abbreviation is a body when korpus knows it (bodies._KNOWN_ACRONYMS)
    around = text[max(0, start - 60) : start] + text[stop : stop + 60]  # running Latin text has lower-case words
    return len(re.findall(r"\b[А-ЯЁа-яё]{2,}", around)) > len(re.findall(r"\b[a-z]{2,}\b", around))


_NAME_TOKEN = re.compile(r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?|[A-Z]\.|\n")


def latin_people(span: str) -> list[tuple[int, int]]:
    """A Latin-script person span split person by person, as [start, end) in `span`: a reference list runs its
    authors together («Matteo Frigo Steven G. Johnson», «Ye Jia Rif A. Saurous»). A new person starts at a line break,
    at a first name korpus knows after a first and last name, and at the word before an initial once a first and last
    name stand before it. One person's span comes back whole."""
    tokens = [(m.group(0), m.start(), m.end()) for m in _NAME_TOKEN.finditer(span)]
    starts, names_since = [0], 0
    for i, (token, _, _) in enumerate(tokens):
        if token == "\n":
            starts.append(i + 1)
            names_since = 0
            continue
        initial_next = i + 1 < len(tokens) and tokens[i + 1][0].endswith(".")
        if names_since >= 2 and not token.endswith(".") and (token in FIRST_NAMES or initial_next):
            starts.append(i)
            names_since = 0
        names_since += not token.endswith(".")
    pieces = [tokens[a:b] for a, b in zip(starts, [*starts[1:], len(tokens)], strict=True)]
    pieces = [[t for t in piece if t[0] != "\n"] for piece in pieces]
    return [(piece[0][1], piece[-1][2]) for piece in pieces if piece] or [(0, len(span))]
