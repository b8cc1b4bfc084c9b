"""The tool catalogue of the built-in demo set: 32 tools across eight domains.

Each tool is a :class:`DemoTool`: its RLLA schema (name, description, parameters with
``type`` / ``description`` / ``default``) plus what the generator needs to write a request
for it: a sentence template naming the required arguments, one phrase per optional argument,
and a small pool of values per argument. Written for this project.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # RLLA type: str, int, float, bool
    description: str
    pool: tuple[Any, ...]
    optional: bool = False
    phrase: str = ""  # optional arguments: how a request mentions them, with {v}


@dataclass(frozen=True)
class DemoTool:
    domain: str
    name: str
    description: str
    params: tuple[Param, ...]
    request: str  # required arguments as {name}

    def schema(self) -> dict[str, dict[str, Any]]:
        out = {}
        for p in self.params:
            t = f"{p.type}, optional" if p.optional else p.type
            out[p.name] = {"description": p.description, "type": t, "default": ""}
        return out


CITIES = ("Paris", "Tokyo", "Nairobi", "Lima", "Oslo", "Montréal", "São Paulo", "Hanoi")
DATES = ("2025-03-14", "2025-07-01", "2025-11-23", "2026-01-09")
NAMES = ("Amara Okafor", "Lukas Berg", "Mei Tanaka", "Diego Alvarez", "Sofia Rossi")
EMAILS = ("amara@example.org", "lukas.berg@example.com", "mei@example.net", "diego@example.org")
TICKERS = ("AAPL", "MSFT", "NVDA", "TSLA", "SAP")
CURRENCIES = ("USD", "EUR", "JPY", "GBP", "KES")
SONGS = ("Bohemian Rhapsody", "Clair de Lune", "Pata Pata", "Take Five")
ITEMS = ("running shoes", "coffee grinder", "desk lamp", "rain jacket")

P = Param
TOOLS: tuple[DemoTool, ...] = (
    # weather
    DemoTool("weather", "get_current_weather", "Current weather conditions for a city.",
             (P("city", "str", "City name.", CITIES),
              P("units", "str", "metric or imperial.", ("metric", "imperial"), True, "in {v} units")),
             "What's the weather like in {city} right now?"),
    DemoTool("weather", "get_forecast", "Daily weather forecast for a city.",
             (P("city", "str", "City name.", CITIES), P("days", "int", "Number of days, 1-10.", (3, 5, 7)),
              P("include_hourly", "bool", "Add hourly detail.", (True,), True, "with hourly detail")),
             "Give me the {days}-day forecast for {city}."),
    DemoTool("weather", "get_air_quality", "Air quality index for a city.",
             (P("city", "str", "City name.", CITIES),),
             "How is the air quality in {city}?"),
    DemoTool("weather", "get_sunrise_sunset", "Sunrise and sunset times for a city on a date.",
             (P("city", "str", "City name.", CITIES), P("date", "str", "Date, YYYY-MM-DD.", DATES)),
             "When do the sun rise and set in {city} on {date}?"),
    # finance
    DemoTool("finance", "get_stock_price", "Latest trading price of a stock.",
             (P("ticker", "str", "Stock ticker symbol.", TICKERS),
              P("exchange", "str", "Exchange code.", ("NASDAQ", "NYSE", "XETRA"), True, "on the {v} exchange")),
             "What is {ticker} trading at?"),
    DemoTool("finance", "convert_currency", "Convert an amount between two currencies.",
             (P("amount", "float", "Amount to convert.", (12.5, 100.0, 2500.0)),
              P("from_currency", "str", "ISO code to convert from.", CURRENCIES),
              P("to_currency", "str", "ISO code to convert to.", CURRENCIES)),
             "Convert {amount} {from_currency} to {to_currency}."),
    DemoTool("finance", "calculate_loan_payment", "Monthly payment of a fixed-rate loan.",
             (P("principal", "float", "Loan amount.", (15000.0, 250000.0)),
              P("annual_rate", "float", "Yearly interest rate in percent.", (3.5, 4.25, 6.0)),
              P("years", "int", "Term in years.", (5, 15, 30))),
             "What's the monthly payment on a {principal} loan at {annual_rate}% over {years} years?"),
    DemoTool("finance", "get_exchange_rate_history", "Historical exchange rates between two currencies.",
             (P("base", "str", "Base currency.", CURRENCIES), P("quote", "str", "Quote currency.", CURRENCIES),
              P("days", "int", "How many past days.", (7, 30), True, "for the last {v} days")),
             "Show me how {base} moved against {quote}."),
    # travel
    DemoTool("travel", "search_flights", "Search flights between two cities on a date.",
             (P("origin", "str", "Departure city.", CITIES), P("destination", "str", "Arrival city.", CITIES),
              P("date", "str", "Departure date, YYYY-MM-DD.", DATES),
              P("nonstop_only", "bool", "Only direct flights.", (True,), True, "direct flights only"),
              P("max_price", "int", "Price ceiling in USD.", (300, 800), True, "under {v} dollars")),
             "Find flights from {origin} to {destination} on {date}."),
    DemoTool("travel", "search_hotels", "Find hotels in a city for given dates.",
             (P("city", "str", "City name.", CITIES), P("check_in", "str", "YYYY-MM-DD.", DATES),
              P("nights", "int", "Number of nights.", (1, 3, 4)),
              P("min_stars", "int", "Minimum star rating.", (3, 4), True, "with at least {v} stars")),
             "Look for a hotel in {city} from {check_in} for {nights} nights."),
    DemoTool("travel", "get_visa_requirements", "Visa rules for a citizen visiting a country.",
             (P("citizenship", "str", "Traveller's country.", ("Kenya", "Peru", "Vietnam", "Norway")),
              P("destination", "str", "Country to visit.", ("Japan", "France", "Brazil", "Canada"))),
             "Do I need a visa for {destination} with a passport from {citizenship}?"),
    DemoTool("travel", "get_travel_time", "Travel time between two places by a mode of transport.",
             (P("origin", "str", "Start.", CITIES), P("destination", "str", "End.", CITIES),
              P("mode", "str", "driving, transit or walking.", ("transit", "walking"), True, "by {v}")),
             "How long does it take to get from {origin} to {destination}?"),
    # calendar
    DemoTool("calendar", "create_event", "Create a calendar event.",
             (P("title", "str", "Event title.", ("Team sync", "Dentist", "Project review")),
              P("date", "str", "YYYY-MM-DD.", DATES), P("start_time", "str", "HH:MM.", ("09:00", "14:30")),
              P("duration_minutes", "int", "Length in minutes.", (30, 60, 90), True, "lasting {v} minutes")),
             "Put '{title}' on my calendar on {date} at {start_time}."),
    DemoTool("calendar", "list_events", "List calendar events on a date.",
             (P("date", "str", "YYYY-MM-DD.", DATES),),
             "What's on my calendar on {date}?"),
    DemoTool("calendar", "delete_event", "Delete a calendar event by its id.",
             (P("event_id", "int", "Event id.", (1042, 2210, 3377)),),
             "Please delete event {event_id}."),
    DemoTool("calendar", "set_reminder", "Set a reminder at a time.",
             (P("message", "str", "What to remind.", ("call mum", "water the plants", "submit the report")),
              P("time", "str", "HH:MM.", ("07:15", "18:00")),
              P("repeat_daily", "bool", "Repeat every day.", (True,), True, "every day")),
             "Remind me to {message} at {time}."),
    # communication
    DemoTool("communication", "send_email", "Send an email.",
             (P("to", "str", "Recipient address.", EMAILS), P("subject", "str", "Subject line.",
                                                             ("Invoice", "Meeting notes", "Hello")),
              P("cc", "str", "Copy address.", EMAILS, True, "copying {v}")),
             "Send an email to {to} with the subject '{subject}'."),
    DemoTool("communication", "send_sms", "Send a text message.",
             (P("phone_number", "str", "Phone in E.164 form.", ("+254700123456", "+4791234567")),
              P("message", "str", "Text.", ("On my way", "Running 10 minutes late"))),
             "Text {phone_number}: '{message}'."),
    DemoTool("communication", "lookup_contact", "Find a contact by name.",
             (P("name", "str", "Contact name.", NAMES),),
             "Find the contact details of {name}."),
    DemoTool("communication", "translate_text", "Translate text into a language.",
             (P("text", "str", "Text to translate.", ("Good morning", "Where is the station?", "Thank you")),
              P("target_language", "str", "ISO 639-1 code.", ("fr", "ja", "sw", "es")),
              P("formal", "bool", "Use the formal register.", (True,), True, "in a formal register")),
             "Translate '{text}' into {target_language}."),
    # shopping
    DemoTool("shopping", "search_products", "Search the shop catalogue.",
             (P("query", "str", "Search words.", ITEMS),
              P("max_price", "float", "Highest price.", (50.0, 120.0), True, "under {v}"),
              P("sort_by", "str", "relevance, price or rating.", ("price", "rating"), True, "sorted by {v}")),
             "Search the shop for {query}."),
    DemoTool("shopping", "track_order", "Status of an order.",
             (P("order_id", "str", "Order number.", ("A-1001", "B-2417", "C-0093")),),
             "Where is my order {order_id}?"),
    DemoTool("shopping", "add_to_cart", "Add a product to the cart.",
             (P("product_id", "int", "Product id.", (501, 782, 930)), P("quantity", "int", "How many.", (1, 2, 3))),
             "Add {quantity} of product {product_id} to my cart."),
    DemoTool("shopping", "apply_coupon", "Apply a coupon code to the cart.",
             (P("code", "str", "Coupon code.", ("SPRING10", "WELCOME5")),),
             "Apply the coupon {code}."),
    # media
    DemoTool("media", "play_song", "Play a song.",
             (P("title", "str", "Song title.", SONGS),
              P("shuffle", "bool", "Shuffle afterwards.", (True,), True, "and shuffle after it")),
             "Play {title}."),
    DemoTool("media", "get_movie_showtimes", "Cinema showtimes for a movie in a city.",
             (P("movie", "str", "Movie title.", ("Dune", "Spirited Away", "Parasite")),
              P("city", "str", "City.", CITIES)),
             "When is {movie} showing in {city}?"),
    DemoTool("media", "search_podcasts", "Search podcasts by topic.",
             (P("topic", "str", "Topic.", ("astronomy", "cooking", "history")),
              P("limit", "int", "Maximum results.", (5, 10), True, "show me {v} of them")),
             "Find podcasts about {topic}."),
    DemoTool("media", "get_news_headlines", "Top news headlines by category.",
             (P("category", "str", "news category.", ("science", "sports", "business")),),
             "What are today's top {category} headlines?"),
    # utilities and math
    DemoTool("utilities", "calculate_bmi", "Body-mass index from weight and height.",
             (P("weight_kg", "float", "Weight in kg.", (58.0, 72.5, 90.0)),
              P("height_m", "float", "Height in metres.", (1.62, 1.75, 1.88))),
             "What's the BMI for {weight_kg} kg and {height_m} m?"),
    DemoTool("utilities", "convert_units", "Convert a value between units.",
             (P("value", "float", "Amount.", (3.0, 42.0, 100.0)), P("from_unit", "str", "Unit.", ("km", "mile", "kg")),
              P("to_unit", "str", "Unit.", ("mile", "km", "lb"))),
             "Convert {value} {from_unit} to {to_unit}."),
    DemoTool("utilities", "get_time_in_timezone", "Current time in a time zone.",
             (P("timezone", "str", "IANA zone.", ("Asia/Tokyo", "Europe/Oslo", "America/Lima")),),
             "What time is it in {timezone}?"),
    DemoTool("utilities", "generate_password", "Generate a random password.",
             (P("length", "int", "Number of characters.", (12, 16, 24)),
              P("include_symbols", "bool", "Use symbols.", (True,), True, "including symbols")),
             "Generate a {length}-character password."),
)

#: requests that no tool serves, with the direct reply the reference gives
NO_CALL_TURNS: tuple[tuple[str, str], ...] = (
    ("Thanks, that's all I needed!", "You're welcome! Let me know if there is anything else."),
    ("Can you tell me a joke?", "Why did the scarecrow win an award? Because he was outstanding in his field."),
    ("What's the capital of Australia?", "The capital of Australia is Canberra."),
    ("Who wrote 'One Hundred Years of Solitude'?", "Gabriel García Márquez wrote it."),
    ("Book me a table for two tonight.", "I can't book restaurants with the tools I have; could I help otherwise?"),
    ("Hello there!", "Hello! How can I help you today?"),
    ("Can you order me a pizza?", "I don't have a food-ordering tool, so I can't place that order."),
    ("What does 'serendipity' mean?", "Serendipity means finding something good without looking for it."),
)
