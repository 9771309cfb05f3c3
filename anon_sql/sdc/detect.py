"""PII detection (in the spirit of PostgreSQL Anonymizer's anon.detect): suggest identifier / quasi roles from column
names (multilingual hints) and from value patterns measured in one SQL aggregate over a reproducible sample."""
from __future__ import annotations

import json
import re
import unicodedata
from datetime import date

import duckdb
import pandas as pd
from sqlglot import exp

from anon_sql.errors import PolicyError

from ._source import columns_of
from .sqlparts import call, col, ident, lit, render, table_or_subquery

# ---------------------------------------------------------------------------------------------------- name hints
# (role, what, confidence, words): a word of 5+ letters matches inside the compacted name, a shorter one only as a
# whole token ("tel" in "tel_mobile", not in "hotel"). English, French, German, Spanish, Italian, Portuguese.
_NAME_HINTS: list[tuple[str, str, float, tuple[str, ...]]] = [
    ("identifier", "a person's name", 0.8, (
        "firstname", "forename", "givenname", "prenom", "vorname", "nombre", "lastname", "surname", "familyname",
        "nachname", "apellido", "apellidos", "cognome", "sobrenome", "fullname", "nomcomplet", "name", "nom", "nome",
        "username", "login", "pseudo", "benutzername")),
    ("identifier", "an email address", 0.9, ("email", "mail", "courriel", "correo", "emailaddress")),
    ("identifier", "a phone number", 0.85, (
        "phone", "telephone", "telefon", "telefono", "telemovel", "mobile", "portable", "cellphone", "handy", "fax",
        "tel", "gsm")),
    ("identifier", "a national identification number", 0.9, (
        "ssn", "socialsecurity", "securitesociale", "numerosecu", "insee", "nir", "sozialversicherung", "steuerid",
        "nationalid", "passport", "passeport", "reisepass", "pasaporte", "dni", "nif", "nie", "codicefiscale",
        "taxid", "nino", "driverlicense", "driverslicense", "permisconduire", "idcard", "personalausweis")),
    ("identifier", "a bank or card number", 0.9, (
        "iban", "bic", "swift", "accountnumber", "bankaccount", "numerocompte", "kontonummer", "creditcard",
        "cardnumber", "cartebancaire", "pan")),
    ("identifier", "a postal address", 0.8, (
        "address", "adresse", "direccion", "indirizzo", "endereco", "street", "strasse", "rue", "calle", "via",
        "domicile", "housenumber")),
    ("identifier", "a network address", 0.7, ("ipaddress", "ip", "macaddress", "ipv4", "ipv6")),
    ("quasi", "a date of birth", 0.85, (
        "birth", "birthdate", "dateofbirth", "dob", "birthday", "naissance", "datenaissance", "geburt", "geburtsdatum",
        "nacimiento", "nascita", "nascimento")),
    ("quasi", "a postcode", 0.8, (
        "zip", "zipcode", "postcode", "postal", "codepostal", "plz", "postleitzahl", "codigopostal", "cap", "cp")),
    ("quasi", "an age", 0.75, ("age", "edad", "eta", "idade", "alter")),
    ("quasi", "sex or gender", 0.75, ("sex", "gender", "sexe", "genre", "geschlecht", "sexo", "sesso")),
    ("quasi", "a place", 0.65, (
        "city", "town", "ville", "commune", "stadt", "ort", "ciudad", "citta", "cidade", "county", "departement",
        "region", "latitude", "longitude", "geoloc", "gps")),
    ("quasi", "a country or nationality", 0.6, (
        "country", "pays", "nationality", "nationalite", "land", "pais", "paese", "nativecountry", "citizenship")),
    ("quasi", "ethnicity", 0.65, ("race", "ethnicity", "ethnie", "ethnic", "origine")),
    ("quasi", "a marital status", 0.6, (
        "marital", "maritalstatus", "civilstatus", "situationfamiliale", "familienstand", "estadocivil")),
    ("quasi", "an occupation or employer", 0.55, (
        "occupation", "job", "jobtitle", "profession", "metier", "beruf", "employer", "employeur", "profesion")),
    ("quasi", "an education level", 0.5, ("education", "diploma", "diplome", "bildung", "educacion", "degree")),
]


def _tokens(name: str) -> tuple[str, list[str]]:
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    plain = re.sub(r"([a-z])([A-Z])", r"\1_\2", plain)
    tokens = [t for t in re.split(r"[^a-z0-9]+", plain) if t]
    return "".join(tokens), tokens


def name_hints(name: str) -> list[tuple[str, str, float]]:
    """(role, reason, confidence) for each hint the column name carries."""
    compact, tokens = _tokens(name)
    out = []
    for role, what, conf, words in _NAME_HINTS:
        hit = next((w for w in words if (w in tokens) or (len(w) >= 5 and w in compact)), None)
        if hit:
            out.append((role, f"name {name!r} suggests {what} ({hit!r})", conf))
    return out


# --------------------------------------------------------------------------------------------------- value patterns

_RE = {
    "email": r"[A-Za-z0-9._%+'-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",
    "phone": r"\+?[0-9][0-9 ().-]{6,18}[0-9]",
    "ssn": r"[0-8][0-9]{2}-[0-9]{2}-[0-9]{4}",
    "nir": r"[12][0-9]{2}(0[1-9]|1[0-2]|[2-9][0-9])[0-9]{8}[0-9]{2}",
    "iban": r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}",
    "postcode": r"[0-9]{5}(-[0-9]{4})?|[A-Z]{1,2}[0-9][A-Z0-9]? ?[0-9][A-Z]{2}|[A-Z][0-9][A-Z] ?[0-9][A-Z][0-9]"
                r"|[0-9]{4} ?[A-Z]{2}",
}
_PATTERNS = {  # key: (role, reason, confidence at 100 % match)
    "email": ("identifier", "email addresses", 0.95),
    "phone": ("identifier", "phone numbers", 0.8),
    "ssn": ("identifier", "US social security numbers", 0.95),
    "nir": ("identifier", "French INSEE numbers (NIR) with a valid key", 0.95),
    "iban": ("identifier", "IBANs with a valid mod-97 check", 0.97),
    "postcode": ("quasi", "postcodes", 0.6),
    "birth": ("quasi", "past dates spread over decades (dates of birth?)", 0.6),
    "unique": ("identifier", "a distinct value in almost every sampled row", 0.55),
}
MIN_SHARE = 0.8          # a pattern counts when at least this share of the sampled non-NULL values match


def _s(c: exp.Expression) -> exp.Expression:
    return exp.Cast(this=c, to=exp.DataType.build("VARCHAR"))


def _match(v: exp.Expression, key: str) -> exp.Expression:
    return call("regexp_full_match", v, lit(_RE[key]))


def _digits_only(v: exp.Expression) -> exp.Expression:
    return call("regexp_replace", v, lit(r"[ ().-]"), lit(""), lit("g"))


def _mod97(digits: exp.Expression) -> exp.Expression:
    """digits mod 97 by 9-digit chunks (an IBAN's digit string is up to ~70 digits: more than HUGEINT holds)."""
    r: exp.Expression = lit(0)
    for start in range(1, 82, 9):
        chunk = call("substr", digits.copy(), lit(start), lit(9))
        scale = exp.Cast(this=call("power", lit(10), call("length", chunk.copy())),
                         to=exp.DataType.build("BIGINT"))
        value = exp.Coalesce(this=exp.TryCast(this=chunk.copy(), to=exp.DataType.build("BIGINT")),
                             expressions=[lit(0)])
        r = exp.Mod(this=exp.Paren(this=exp.Add(this=exp.Mul(this=exp.Paren(this=r), expression=scale),
                                                 expression=value)), expression=lit(97))
    return r


def _iban_valid(v: exp.Expression) -> exp.Expression:
    compact = call("upper", call("replace", v, lit(" "), lit("")))
    moved = call("concat", call("substr", compact.copy(), lit(5)), call("left", compact.copy(), lit(4)))
    digits: exp.Expression = moved
    for i in range(26):                            # A → 10 … Z → 35
        digits = call("replace", digits, lit(chr(65 + i)), lit(str(10 + i)))
    # CASE, not AND: the 26 replaces and the chunked mod run only on values shaped like an IBAN
    return exp.Case(ifs=[exp.If(this=_match(compact.copy(), "iban"),
                                true=exp.EQ(this=_mod97(digits), expression=lit(1)))], default=exp.false())


def _nir_valid(v: exp.Expression) -> exp.Expression:
    d = _digits_only(v)
    body = exp.TryCast(this=call("left", d.copy(), lit(13)), to=exp.DataType.build("BIGINT"))
    key = exp.TryCast(this=call("right", d.copy(), lit(2)), to=exp.DataType.build("BIGINT"))
    return exp.Case(ifs=[exp.If(this=_match(d.copy(), "nir"), true=exp.EQ(this=exp.Sub(
        this=lit(97), expression=exp.Mod(this=body, expression=lit(97))), expression=key))], default=exp.false())


def _ssn_valid(v: exp.Expression) -> exp.Expression:
    return exp.and_(_match(v, "ssn"), exp.Not(this=call("regexp_matches", v.copy(),
                                                                 lit(r"^(000|666)|^...-00|-0000$"))))


def _phone(v: exp.Expression) -> exp.Expression:
    n_digits = call("length", call("regexp_replace", v.copy(), lit(r"[^0-9]"), lit(""), lit("g")))
    return exp.and_(_match(v, "phone"), exp.Between(this=n_digits, low=lit(8), high=lit(15)),
                    call("regexp_matches", v.copy(), lit(r"^(\+|0|\()|[ ().-]")))


def _share(cond: exp.Expression, column: str) -> exp.Expression:
    return exp.Div(this=exp.func("count_if", cond), expression=exp.Nullif(
        this=exp.func("count", col(column)), expression=lit(0)))


def _is_text(t: str) -> bool:
    return t.upper() in ("VARCHAR", "TEXT", "STRING") or t.upper().startswith("VARCHAR")


def _is_int(t: str) -> bool:
    return t.upper() in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                         "UBIGINT", "UHUGEINT")


def _is_date(t: str) -> bool:
    return t.upper() == "DATE" or t.upper().startswith("TIMESTAMP")


def _measures(name: str, kind: str) -> list[tuple[str, exp.Expression]]:
    c = col(name)
    out = [("count", exp.func("count", c.copy())),
           ("distinct", exp.func("count", exp.Distinct(expressions=[c.copy()])))]
    if kind == "text":
        v = _s(c)
        out += [("email", _share(_match(v.copy(), "email"), name)), ("phone", _share(_phone(v.copy()), name)),
                ("ssn", _share(_ssn_valid(v.copy()), name)), ("nir", _share(_nir_valid(v.copy()), name)),
                ("iban", _share(_iban_valid(v.copy()), name)),
                ("postcode", _share(_match(call("upper", v.copy()), "postcode"), name))]
        d = exp.TryCast(this=v.copy(), to=exp.DataType.build("DATE"))
    elif kind == "date":
        d = exp.Cast(this=c.copy(), to=exp.DataType.build("DATE"))
    else:
        return out
    today = lit(date.today().isoformat())
    past = exp.Between(this=d.copy(), low=exp.Cast(this=lit("1900-01-01"), to=exp.DataType.build("DATE")),
                       high=exp.Cast(this=today, to=exp.DataType.build("DATE")))
    out += [("birth", _share(past, name)),
            ("span_years", exp.Div(this=call("date_diff", lit("day"), exp.func("min", d.copy()),
                                                 exp.func("max", d.copy())), expression=lit(365.25)))]
    return out


def _noisy_or(confidences: list[float]) -> float:
    p = 1.0
    for c in confidences:
        p *= 1 - c
    return round(1 - p, 3)


def toml_key(name: str) -> str:
    """A TOML key for a column name: bare when it can be, else a quoted basic string."""
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name, ensure_ascii=False)


def policy_line(name: str, role: str) -> str:
    """The lines to paste into a policy: ``[attributes.<col>]`` then ``role = "..."``."""
    return f'[attributes.{toml_key(name)}]\nrole = "{role}"'


def detect(con: duckdb.DuckDBPyConnection, source: str | exp.Table, sample: int = 10_000,
           seed: int = 0) -> pd.DataFrame:
    """Suggested roles for the columns of ``source``: one row per column with evidence — column, role
    (identifier | quasi), reason, confidence (0–1; evidence from the name and from the values combined as a
    noisy-or), policy (a snippet to paste). Values are measured in one SQL aggregate over a reservoir sample of
    ``sample`` rows (REPEATABLE by ``seed``); a pattern counts when >= 80 % of the sampled non-NULL values match it."""
    if not isinstance(sample, int) or isinstance(sample, bool) or sample < 1:
        raise PolicyError(f"detect: sample is a number of rows >= 1, got {sample!r}")
    types = columns_of(con, source)
    kinds = {c: "text" if _is_text(t) else "date" if _is_date(t) else "int" if _is_int(t) else "other"
             for c, t in types.items()}
    selects, slots = [], []
    for i, c in enumerate(types):
        for what, e in _measures(c, kinds[c]):
            slots.append((c, what))
            selects.append(exp.alias_(e, ident(f"m{len(slots)}")))
    sampled = exp.select(exp.Star()).from_(table_or_subquery(source))
    sampled.set("sample", exp.TableSample(method=exp.var("RESERVOIR"), size=exp.Literal.number(sample),
                                          seed=exp.Literal.number(int(seed))))
    query = exp.select(*selects).from_(exp.Subquery(this=sampled, alias=exp.TableAlias(this=ident("s"))))
    values = con.execute(render(query)).fetchall()[0]
    measured: dict[str, dict[str, float]] = {c: {} for c in types}
    for (c, what), v in zip(slots, values):
        measured[c][what] = v
    rows = []
    for c in types:
        evidence = name_hints(c)
        m = measured[c]
        for key in ("email", "ssn", "nir", "iban", "phone", "postcode", "birth"):
            share = m.get(key)
            if share is not None and share >= MIN_SHARE and m["count"]:
                if key == "birth" and (m.get("span_years") or 0) < 15:
                    continue
                role, reason, conf = _PATTERNS[key]
                evidence.append((role, f"{share:.0%} of sampled values look like {reason}", conf * share))
                if key in ("email", "ssn", "nir", "iban"):
                    break                          # a stronger pattern explains the value; phone/postcode would not
        if kinds[c] in ("text", "int") and m["count"] >= 20 and m["distinct"] >= 0.95 * m["count"]:
            role, reason, conf = _PATTERNS["unique"]
            evidence.append((role, f"{reason} ({m['distinct']} of {m['count']})", conf))
        if not evidence:
            continue
        roles = {r for r, _, _ in evidence}
        role = "identifier" if "identifier" in roles and max(
            (cf for r, _, cf in evidence if r == "identifier"), default=0) >= max(
            (cf for r, _, cf in evidence if r == "quasi"), default=0) else "quasi"
        chosen = [e for e in evidence if e[0] == role]
        rows.append({"column": c, "role": role, "reason": "; ".join(r for _, r, _ in chosen),
                     "confidence": _noisy_or([cf for _, _, cf in chosen]), "policy": policy_line(c, role)})
    frame = pd.DataFrame(rows, columns=["column", "role", "reason", "confidence", "policy"])
    return frame.sort_values(["confidence", "column"], ascending=[False, True], ignore_index=True)


__all__ = ["MIN_SHARE", "detect", "name_hints", "policy_line", "toml_key"]
