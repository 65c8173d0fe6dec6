"""Which time zone a user lives in (docs/reminders.md, Time zones).

The user's own word wins ("estou em Manaus": the reply model calls set_time_zone, kept as the
session fact `time_zone`). Until then the number tells, through the `phonenumbers` package's
own tables (Google's libphonenumber data, so we keep no list of area codes): a Brazilian
number from area 92 is Manaus, one from 11 São Paulo. Where a number fits several zones, a
country whose people nearly all live in one gets that one (PRIMARY); elsewhere (the United
States, Mexico, Australia…) the zone is unknown, and the model asks.
"""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

#: Countries with islands or a far province on another clock, and one zone nearly all their
#: people live in (Portugal's Azores, Spain's Canaries, Brazil's west…).
PRIMARY = {
    "PT": "Europe/Lisbon", "ES": "Europe/Madrid", "BR": "America/Sao_Paulo", "GB": "Europe/London",
    "FR": "Europe/Paris", "CL": "America/Santiago", "EC": "America/Guayaquil", "DK": "Europe/Copenhagen",
    "NL": "Europe/Amsterdam", "NZ": "Pacific/Auckland", "AR": "America/Argentina/Buenos_Aires",
}
#: The session fact a user's own time zone is kept under.
FACT_KEY = "time_zone"


def valid_zone(name: str | None) -> str | None:
    """Return the IANA zone's canonical spelling when it is one ("america/manaus" too), else None."""
    if not name:
        return None
    name = name.strip()
    if name in _zones():
        return name
    return _zones_lower().get(name.lower())


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    return frozenset(z for z in available_timezones() if "/" in z or z == "UTC")


@lru_cache(maxsize=1)
def _zones_lower() -> dict[str, str]:
    return {z.lower(): z for z in _zones()}


@lru_cache(maxsize=4096)
def zone_of_number(number: str) -> str | None:
    """Return the time zone a number's country and area tell, or None when they do not
    (several zones and no primary one, or a number phonenumbers cannot read)."""
    import phonenumbers
    from phonenumbers import timezone as number_zones

    try:
        parsed = phonenumbers.parse(number)
    except phonenumbers.NumberParseException:
        return None
    found = [z for z in number_zones.time_zones_for_number(parsed) if valid_zone(z)]
    if len(found) == 1:
        return found[0]
    region = phonenumbers.region_code_for_number(parsed) or phonenumbers.region_code_for_country_code(
        parsed.country_code)
    primary = PRIMARY.get(region or "")
    if primary and (not found or primary in found):
        return primary
    return None


def zone(name: str) -> ZoneInfo:
    """Return the ZoneInfo of a valid zone name (UTC for anything else)."""
    try:
        return ZoneInfo(valid_zone(name) or "UTC")
    except ZoneInfoNotFoundError:
        return ZoneInfo("UTC")
