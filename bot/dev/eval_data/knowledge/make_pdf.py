"""Write prices.pdf, the knowledge eval's price list, next to this file.

    python bot/dev/eval_data/knowledge/make_pdf.py

The output is byte-stable: a fixed creation date and producer (fpdf2 derives the document
id from the content and that date) and core fonts, which are not embedded. Core fonts are
Latin-1 (accents work; "€" and "—" do not), so prices sit in a "Price (EUR)" column and
the title uses a hyphen.

Product names are given in English, Portuguese and Spanish, so that a question in any of
the three languages finds its row lexically (the eval has no translation or synonyms).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from fpdf import FPDF
from fpdf.fonts import FontFace

OUT = Path(__file__).with_name("prices.pdf")
CREATED = dt.datetime(2026, 1, 5, 9, 0, 0, tzinfo=dt.timezone.utc)

HEADINGS = ("Product", "Produto", "Producto", "Size", "Price (EUR)")
COL_WIDTHS = (62, 62, 62, 42, 29)  # mm; A4 landscape leaves 277 mm between the margins

PASTRIES = (
    ("Custard tart", "Pastel de nata", "Pastel de nata", "1 unit", "1.30"),
    ("Custard tarts, box of 6", "Caixa de 6 pastéis de nata", "Caja de 6 pasteles de nata", "6 units", "7.20"),
    ("Butter croissant", "Croissant de manteiga", "Cruasán de mantequilla", "1 unit", "1.60"),
    (
        "Vegan croissant (weekends)", "Croissant vegan (fim de semana)", "Cruasán vegano (fin de semana)",
        "1 unit", "2.10",
    ),
    ("Coconut bun (pão de Deus)", "Pão de Deus", "Pan de Dios (bollo de coco)", "1 unit", "1.50"),
    ("Custard doughnut", "Bola de Berlim", "Bola de Berlín (berlina de crema)", "1 unit", "1.80"),
    ("Chocolate cake, slice", "Bolo de chocolate, fatia", "Tarta de chocolate, porción", "1 slice", "3.50"),
    (
        "Chocolate cake, whole", "Bolo de chocolate inteiro", "Tarta de chocolate entera",
        "1 kg (8 slices)", "26.00",
    ),
    (
        "Gluten-free almond cake, slice", "Bolo de amêndoa sem glúten, fatia", "Tarta de almendra sin gluten, porción",
        "1 slice", "3.80",
    ),
    (
        "Custom cake (made to order)", "Bolo personalizado (por encomenda)", "Tarta personalizada (por encargo)",
        "per kg, min. 1.5 kg", "32.00",
    ),
)

DRINKS_SAVOURY = (
    ("Espresso", "Café (bica)", "Café solo", "30 ml", "0.90"),
    ("Galão (milky coffee)", "Galão", "Galão (café con leche)", "250 ml glass", "1.60"),
    ("Cappuccino", "Cappuccino", "Capuchino", "1 cup", "2.40"),
    ("Hot chocolate", "Chocolate quente", "Chocolate caliente", "1 cup", "2.80"),
    ("Tea (pot)", "Chá (bule)", "Té (tetera)", "400 ml pot", "2.00"),
    ("Fresh orange juice", "Sumo de laranja natural", "Zumo de naranja natural", "25 cl", "3.00"),
    (
        "Oat or soy milk (extra)", "Bebida de aveia ou soja (extra)", "Bebida de avena o soja (extra)",
        "per drink", "0.30",
    ),
    ("Ham and cheese toastie", "Tosta mista", "Sándwich mixto", "1 unit", "3.90"),
    ("Chicken sandwich", "Sandes de frango", "Bocadillo de pollo", "1 unit", "5.50"),
    ("Vegetarian sandwich", "Sandes vegetariana", "Bocadillo vegetariano", "1 unit", "5.20"),
    ("Lumi breakfast (galão, toast, juice)", "Pequeno-almoço Lumi", "Desayuno Lumi", "1 set", "5.90"),
)


def _table(pdf: FPDF, title: str, rows: tuple[tuple[str, ...], ...]) -> None:
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 7, title, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 9)
    with pdf.table(
        col_widths=COL_WIDTHS,
        width=sum(COL_WIDTHS),
        text_align=("LEFT", "LEFT", "LEFT", "LEFT", "RIGHT"),
        headings_style=FontFace(emphasis="BOLD", fill_color=(235, 228, 215)),
        line_height=4.6,
        padding=0.9,
    ) as table:
        table.row(HEADINGS)
        for values in rows:
            table.row(values)
    pdf.ln(4)


def build() -> bytes:
    """Return the PDF's bytes."""
    pdf = FPDF(orientation="landscape", format="A4")
    pdf.set_margins(10, 10, 10)
    pdf.set_auto_page_break(auto=True, margin=10)
    pdf.set_creation_date(CREATED)
    pdf.set_title("Casa Lumi - Price list 2026")
    pdf.set_author("Casa Lumi")
    pdf.set_producer("make_pdf.py")
    pdf.add_page()

    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(0, 10, "Casa Lumi - Price list 2026", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 9.5)
    pdf.multi_cell(
        0,
        5,
        "Prices valid from 5 January 2026 in both shops (Ribeira and Boavista) and for delivery. "
        "All prices are in euros and include VAT; eat-in and takeaway prices are the same. "
        "Delivery fees are not included (see the FAQ). "
        "Preços em euros com IVA incluído. Precios en euros con IVA incluido.",
        new_x="LMARGIN",
        new_y="NEXT",
    )
    pdf.ln(3)

    _table(pdf, "Pastries and cakes / Pastelaria e bolos / Bollería y tartas", PASTRIES)
    _table(pdf, "Drinks and savoury / Bebidas e salgados / Bebidas y salados", DRINKS_SAVOURY)
    return bytes(pdf.output())


if __name__ == "__main__":
    OUT.write_bytes(build())
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")
