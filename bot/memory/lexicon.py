"""Word lists of entity matching (bot/memory/matching.py): the ordinary words a name may
also be, the short words of the languages users write in, and the words around a name
that say what it is. Data, no logic.
"""

from __future__ import annotations

#: Ordinary words that are also names people give things: such a name, written in lower
#: case in the message, is the word, not the entity ("an apple a day", "a rocky road").
COMMON_WORDS = frozenset(
    "apple amazon orange java python ruby rose lily daisy ivy jasmine violet iris pearl ruby amber "
    "rocky lucky buddy max bella coco cookie pepper ginger honey sugar candy biscuit peanut "
    "shadow smokey tiger bear duke prince princess king queen angel hope faith grace joy "
    "summer autumn winter spring april may june august sky rain storm river ocean star sunny "
    "bill will mark rich frank jack pat sue ray rob dick chase hunter "
    "mercury jordan georgia chelsea florence paris victoria "
    "target shell oracle slack notion zoom teams office word excel signal "
    "bean bolt chip dot echo flash ghost jazz ace blue red "
    # pet names that are everyday words ("pickle cucumbers", "a muffin tin")
    "pickle muffin nugget mocha olive maple willow cinnamon pumpkin peaches waffles noodle teddy bingo "
    "snowball button buttons socks boots patch sage basil toffee fudge caramel mango kiwi bubbles rusty "
    "dusty misty thunder blaze scout ranger champ chief major captain bandit rebel rocket diesel tank "
    "moose fox wolf bunny kitty pixel nacho taco tofu sushi latte chai cocoa penny midnight smudge "
    "pudding sprout poppy clover hazel pebble pebbles sandy cloud"
    .split()
)

#: Short words of the languages users write in, and chat slang: never a short form or a
#: misspelling of a name ("Can" is not Candace, "The" not Thelma, "lol" not Lolo).
STOPWORDS = frozenset(
    "a an and are as at be but by can could did do does for from had has have he her his how i if in is it "
    "its me my no not of on or our she so that the their them then there they this to too us was we were "
    "what when where which who why will with would yes you your also just like well very much more some any "
    "all one two get got going good great thanks thank please hello hi hey ok okay sure lol omg btw haha "
    "hahaha kkk jaja jeje xd "
    "o os as um uma e de do da dos das em no na nos nas por para com que se ele ela eles elas eu tu voce "
    "você mas mais muito bem sim nao não obrigado obrigada ola olá oi tudo como quando onde qual "
    "el la los las un una y en por con que se lo le les yo tu usted pero mas muy bien si gracias hola "
    "como cuando donde cual "
    "le la les un une et de du des en que qui je tu il elle nous vous ils mais tres très bien oui non merci "
    "bonjour salut "
    "der die das ein eine und in im mit von zu ich du er sie wir ihr aber sehr gut ja nein danke hallo wie "
    "wann wo was"
    .split()
)

#: Every word that is never a one-word name in lower case, built once.
ORDINARY_WORDS = COMMON_WORDS | STOPWORDS

#: Endings a short form may take ("Luki" for Lukas, "Meggie" for Meg); never "o" or "a",
#: which make another name ("Mario", "Maria").
DIMINUTIVE_ENDINGS = ("y", "ie", "i", "sy", "gie", "ito", "ita", "inho", "inha", "ucha", "chen", "ke", "ki")

#: Capitalised by convention (days, months, holidays), not because they continue a name.
CALENDAR = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july "
    "august september october november december christmas easter xmas ramadan eid diwali hanukkah thanksgiving "
    "halloween carnival carnaval".split()
)

#: Words that may stand capitalised before a name without making it another name ("Dr Costa",
#: "Aunt Maria", "Happy birthday Ana").
BEFORE_A_NAME = frozenset(
    "dr dra mr mrs ms mme mlle sr sra srta prof professor herr frau miss sir madam uncle aunt auntie tia tio tía "
    "tío grandma grandpa granny nana oma opa vovo vovó "
    "avo avó mom mum dad mama papa happy dear hi hello hey thanks thank merry congrats congratulations good "
    "little baby big old young sweet poor".split()
)

#: Small words inside a longer proper name ("Waiting for Godot", "Bank of America").
NAME_JOINERS = frozenset("of for the de da do dos das del la le von van der den di".split())

#: Words that introduce a person: what follows is a person, not a place or a thing.
PERSON_BEFORE = frozenset(
    "daughter son wife husband sister brother mother father friend boss colleague neighbour neighbor cousin "
    "niece nephew girlfriend boyfriend partner named called".split()
)

#: An article before a name makes it a kind of thing ("an Elsa costume", "an Islay malt").
ARTICLES = frozenset({"an"})  # not "a": in Spanish and Portuguese it comes before names

#: Goods named after a place or a person: a name right before one of these is the kind of
#: thing, not the entity ("Valencia oranges", "Brussels sprouts", "Boston terrier", "Caesar
#: salad"). Singular forms; a plural is found by its singular.
NAMESAKE_GOODS = frozenset(
    # produce
    "orange apple lemon lime banana grape pear peach plum cherry berry melon mango potato tomato onion "
    "pepper chili chile bean pea sprout lettuce cabbage kale squash corn rice olive almond nut fig date "
    # dishes and foods
    "cheese ham sausage salami bacon mustard sauce dressing salad bread roll bun bagel cake pie tart "
    "cookie biscuit pudding chowder stew curry wing steak chicken noodle pasta pizza waffle toast fries "
    "omelette omelet cream butter yogurt yoghurt chocolate fudge candy jam "
    # drinks
    "tea coffee wine beer ale lager gin rum whisky whiskey sherry brandy vodka latte "
    # breeds
    "terrier spaniel shepherd retriever setter pointer mastiff hound bulldog collie poodle pony cow "
    "cattle sheep hen rabbit "
    # cloth and wares
    "rug carpet lace tweed wool silk porcelain".split()
)

#: Words after such goods that make the name a place again ("Boston coffee shops").
VENUES = frozenset("shop shops place places scene market markets bar bars house houses spot spots "
                   "stall stalls festival fair tour tours restaurant restaurants".split())

#: Abbreviations everyone uses: never the initials of a user's entity ("OK", "UK", "PDF").
#: Not places ("LA", "NYC"): a user who has Los Angeles means it.
ACRONYMS = frozenset(
    "ok okk pls plz ps ai tv pc id it hr pm am omg lol lmao rofl btw fyi asap dm bf gf bff idk tbh ngl "
    "ac jk fb ig yt lmk gg aka rsvp vc hbd wfh afk eod ooo hmu ily ikr tysm ftw pov tl dr "
    "imo imho eta faq usa uk us eu un uae cv pdf gps atm vat tbd rip wtf diy irl afaik brb ty thx np "
    "nvm smh fomo yolo ceo cfo cto vip dj mc md phd mba bsc msc gp er icu ivf pt pe pr qa ui ux api "
    "ios os app sms mms hq bbq abc dna rna hiv std ko kg km cm mm ml "
    "xl xs xxl cd dvd usb hdmi wifi vpn ip url www nba nfl fifa uefa bbc cnn nasa fbi cia"
    .split()
)

#: Titles whose full stop ends no sentence: a name follows ("Dr. Costa", "Sra. Silva").
TITLES = frozenset("dr dra mr mrs ms mme mlle sr sra srta prof".split())
#: Abbreviations whose full stop ends no sentence only inside a name the user has ("St.
#: Louis", "Jarmark św. Dominika"): elsewhere it may ("We moved to Baker St. Rex loves it").
NAME_ABBREVIATIONS = frozenset("st ste sta sto mt sw św sv ul".split())
