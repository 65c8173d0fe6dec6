"""A shared location as one line the model reads, and as the session fact it leaves."""

from __future__ import annotations

from dataclasses import dataclass

@dataclass(frozen=True)
class Location:
    """A location the user shared; a named place has a label and an address."""

    latitude: float
    longitude: float
    label: str = ""
    address: str = ""


#: The session-scope fact a shared location is kept as (it expires like other session facts).
LOCATION_FACT = "current_location"


def place(location: Location) -> str:
    """Return "Label, Address (lat, lon)", with what the location has."""
    named = ", ".join(part for part in (location.label, location.address) if part)
    coordinates = f"{location.latitude:.5f}, {location.longitude:.5f}"
    return f"{named} ({coordinates})" if named else coordinates


def location_line(location: Location, caption: str = "") -> str:
    """Return the line the model reads for a shared location, with the caption after it."""
    line = f"📍 Shared location: {place(location)}"
    return f"{line}\n{caption}" if caption else line
