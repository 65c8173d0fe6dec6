"""Twilio WhatsApp: signature and form in (inbound.py), TwiML out (outbound.py), the route."""
