"""The six kinds of company text of the near-miss set (issue 68): for each, its entities, its attributes (how a
value is drawn, the sentences that state it, the questions that ask for it, the sentences that talk around it
without giving it) and the filler sentences that state no fact. `generate.py` draws companies from these tables.

Each attribute has `keywords`: every sentence stating it holds one of them and no keyword of another attribute of
its kind of text, and no filler holds any (generate.py asserts both), so check.py can look for a statement of an
(entity, attribute, condition) in the text itself: a sentence naming the entity, holding a keyword and a value.
Placeholders: {n} the entity's full name, {v} the value, {c} the condition phrase ({C} capitalised), {m} an
alert's metric, {p} an API's purpose.
"""

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def money(cur, amount):
    return f"{cur}{amount:,}" if isinstance(amount, int) else f"{cur}{amount:.2f}"


def date(rng, years=(2025, 2026)):
    return f"{rng.randint(1, 28)} {rng.choice(MONTHS)} {rng.choice(years)}"


def pick(values):
    return lambda rng, ent, cond: rng.choice(values)


def num(values, unit):
    return lambda rng, ent, cond: f"{rng.choice(values)}{unit}"


# ---------------------------------------------------------------------------------------------------- api
API_NOUNS = {
    "Orders": "creates orders, lists them by status and cancels orders that have not shipped",
    "Returns": "creates return labels, tracks the status of a return and cancels returns that have not shipped",
    "Labels": "buys shipping labels, voids unused ones and downloads them as PDF or ZPL",
    "Shipments": "creates shipments, adds parcels to them and books a carrier collection",
    "Tracking": "looks up tracking events for a parcel and subscribes to status changes",
    "Invoices": "lists invoices, downloads them as PDF and marks them as paid",
    "Refunds": "issues refunds against a payment and reports their settlement",
    "Pickups": "schedules carrier pickups and moves or cancels them",
    "Rates": "quotes carrier rates for a parcel before a label is bought",
    "Customers": "creates customer records, merges duplicates and exports them",
    "Webhooks": "registers webhook endpoints and replays failed deliveries",
    "Payouts": "lists payouts to your bank account and the transactions in each",
    "Inventory": "reads and adjusts stock levels per warehouse",
    "Manifests": "closes the day's manifest for a carrier and downloads it",
}
API_VERSION_SETS = [["v1", "v2"], ["v1", "v2", "v3"], ["v2", "v3"], ["v1", "v2"], ["v1", "v2", "v3"]]

API_ATTRS = [
    dict(key="rate_limit", label="default rate limit", keywords=["rate limit"], numeric=True,
         value=num([100, 120, 300, 500, 600, 900, 1000, 1200, 2400, 3000], " requests per minute"),
         say=["The default rate limit of the {n} is {v} per API key.",
              "By default the {n} accepts {v}; calls over the rate limit get HTTP 429.",
              "Each API key on the {n} has a default rate limit of {v}."],
         ask=["What is the default rate limit of the {n}?",
              "How many requests per minute does the {n} allow by default?",
              "What rate limit applies to the {n} by default?"],
         hedge=["The {n} enforces a rate limit as well, but the figure depends on the account and is not "
                "published in this reference.",
                "Calls to the {n} are subject to a rate limit that support sets per customer."]),
    dict(key="burst_limit", label="burst allowance", keywords=["burst"], numeric=True,
         value=num([20, 50, 100, 150, 200, 250], " extra requests"),
         say=["On top of that, the {n} allows a burst of {v} within any ten seconds.",
              "Short bursts are tolerated: the {n} grants up to {v} before it starts throttling."],
         ask=["How large a burst does the {n} allow?", "What is the burst allowance of the {n}?"],
         hedge=["The {n} tolerates short bursts, though their size is tuned by the platform team."]),
    dict(key="timeout", label="request timeout", keywords=["time out", "timeout", "times out"], numeric=True,
         value=num([5, 10, 15, 20, 30, 45, 60, 90], " seconds"),
         say=["Requests to the {n} time out after {v}.",
              "The {n} has a request timeout of {v}.",
              "If the {n} has not answered within {v}, the request times out and can be retried safely."],
         ask=["What is the request timeout of the {n}?", "After how long does a request to the {n} time out?",
              "How long before a call to the {n} times out?"],
         hedge=["Long-running calls to the {n} can hit a timeout; its length is set per region and not listed "
                "here."]),
    dict(key="page_size", label="maximum page size", keywords=["page size", "per page"], numeric=True,
         value=num([25, 50, 100, 200, 250, 500, 1000], " items"),
         say=["The maximum page size of the {n} is {v}.",
              "List endpoints of the {n} return at most {v} per page.",
              "You can ask the {n} for up to {v} per page with the limit parameter."],
         ask=["What is the maximum page size of the {n}?", "How many items per page can the {n} return?",
              "What page size limit does the {n} have?"],
         hedge=["List endpoints of the {n} are paginated, and the maximum page size may change without notice."]),
    dict(key="payload", label="maximum payload size", keywords=["payload", "request bod"], numeric=True,
         value=num([1, 2, 5, 10, 16, 25, 50], " MB"),
         say=["Request bodies sent to the {n} may be at most {v}.",
              "The maximum payload size of the {n} is {v}.",
              "The {n} rejects any payload larger than {v} with HTTP 413."],
         ask=["What is the maximum payload size of the {n}?", "How large can a request body sent to the {n} be?",
              "What is the largest payload the {n} accepts?"],
         hedge=["Very large payloads are rejected by the {n}; the exact cap is configured at the gateway."]),
    dict(key="sunset", label="switch-off date", keywords=["switched off", "sunset", "retired"], numeric=True,
         value=lambda rng, ent, cond: date(rng),
         say=["The {n} will be switched off on {v}.",
              "The {n} is deprecated and its sunset date is {v}.",
              "After {v} the {n} is retired and calls to it return HTTP 410."],
         ask=["When will the {n} be switched off?", "What is the sunset date of the {n}?",
              "On what date is the {n} retired?"],
         hedge=["The {n} will be switched off eventually, but no date has been announced yet."]),
]
API_FILLERS = [
    "All requests to the {n} use JSON over HTTPS and authenticate with a bearer token.",
    "Every response of the {n} carries a request id; quote it when you contact support.",
    "Timestamps returned by the {n} are in UTC and follow ISO 8601.",
    "Errors come back as a problem document with a machine-readable code and a human-readable message.",
    "Idempotency keys are accepted on every POST, so a retried request never creates a duplicate.",
    "The sandbox mirrors production but never contacts a real carrier.",
    "Field names are snake_case and unknown fields are ignored, so new fields are not breaking changes.",
    "Client libraries for Python, Node and Go wrap the {n} and are generated from its OpenAPI file.",
    "Questions about the {n} are best asked in the developer forum, where the API team answers most days.",
]

# ---------------------------------------------------------------------------------------------------- review
PRODUCT_FAMILIES = ["Drift", "Nimbus", "Pebble", "Vega", "Arlo", "Zephyr", "Orbit", "Halo", "Tide", "Ember",
                    "Quill", "Juno"]
PRODUCT_TIERS = ["Mini", "Max", "Pro", "Lite", "Air", "Go", "Plus", "Duo", "Ultra", "Sport"]

_REVIEW_ATTRS = {
    "charge_time": dict(label="charge time", keywords=["to charge", "charging", "recharge"], numeric=True,
                        value=pick(["45 minutes", "90 minutes", "1.5 hours", "2 hours", "2.5 hours", "3 hours",
                                    "3.5 hours", "4 hours", "5 hours", "6 hours"]),
                        say=["The {n} takes {v} to charge fully.",
                             "Charging the {n} from empty takes {v}.",
                             "In my tests a full recharge of the {n} took {v}."],
                        ask=["How long does the {n} take to charge?", "What is the charge time of the {n}?",
                             "How long does it take to charge the {n} fully?"],
                        hedge=["The {n} is charging over USB-C and the manual says it is quicker than before, "
                               "without a figure."]),
    "battery_life": dict(label="battery life", keywords=["battery life", "lasts"], numeric=True,
                         value=pick(["6 hours", "8 hours", "10 hours", "12 hours", "18 hours", "24 hours",
                                     "36 hours", "48 hours", "5 days", "7 days"]),
                         say=["The {n} lasts {v} {c}.", "{C}, battery life of the {n} is {v}.",
                              "{C}, the {n} lasts {v} between top-ups."],
                         ask=["What is the battery life of the {n} {c}?", "How long does the {n} last {c}?",
                              "How long is the battery life of the {n} {c}?"],
                         hedge=["{C}, battery life of the {n} is shorter, though the maker does not say by how "
                                "much."]),
    "weight": dict(label="weight", keywords=["weigh"], numeric=True,
                   value=None,
                   say=["The {n} weighs {v} {c}.", "{C}, the {n} weighs in at {v}.",
                        "On my kitchen scale the {n} weighed {v} {c}."],
                   ask=["How much does the {n} weigh {c}?", "What does the {n} weigh {c}?",
                        "What is the weight of the {n} {c}?"],
                   hedge=["{C}, the {n} weighs a little more, but the spec sheet does not give the figure."]),
    "max_load": dict(label="maximum load", keywords=["maximum load", "rated for"], numeric=True,
                     value=pick(["15 kg", "20 kg", "22 kg", "25 kg", "100 kg", "120 kg", "130 kg", "150 kg"]),
                     say=["The {n} is rated for {v}.", "The maximum load of the {n} is {v}."],
                     ask=["What is the maximum load of the {n}?", "How much load is the {n} rated for?"],
                     hedge=["The {n} has a maximum load printed on the frame, which I did not note down."]),
    "price": dict(label="price", keywords=["costs", "paid", "list price"], numeric=True, value=None,
                  say=["The {n} costs {v}.", "I paid {v} for the {n}.", "The list price of the {n} is {v}."],
                  ask=["How much does the {n} cost?", "What is the price of the {n}?",
                       "What is the list price of the {n}?"],
                  hedge=["The {n} costs more than the last model, though the shop page hides the list price "
                         "until checkout."]),
    "warranty": dict(label="warranty", keywords=["warranty"], numeric=True,
                     value=pick(["1 year", "2 years", "3 years", "5 years"]),
                     say=["The {n} comes with a warranty of {v}.", "The warranty on the {n} is {v}."],
                     ask=["How long is the warranty on the {n}?", "What warranty does the {n} come with?"],
                     hedge=["The {n} has a warranty that depends on where you bought it."]),
    "water_resistance": dict(label="water resistance", keywords=["water resistan"], numeric=True,
                             value=pick(["30 metres", "50 metres", "100 metres", "IPX4", "IPX7"]),
                             say=["The {n} is water resistant to {v}.",
                                  "Water resistance of the {n} is rated at {v}."],
                             ask=["How water resistant is the {n}?", "What is the water resistance of the {n}?"],
                             hedge=["The {n} has some water resistance, but I would not swim with it."]),
    "range": dict(label="range", keywords=["range of", "of range"], numeric=True,
                  value=pick(["40 km", "55 km", "60 km", "70 km", "80 km", "100 km", "120 km"]),
                  say=["{C}, the {n} has a range of {v}.", "{C}, I get about {v} of range from the {n}."],
                  ask=["What is the range of the {n} {c}?", "How far can the {n} go {c}?"],
                  hedge=["{C}, the {n} has a range of its own that the shop does not publish."]),
    "runtime": dict(label="runtime", keywords=["runs for", "runtime"], numeric=True,
                    value=pick(["60 minutes", "90 minutes", "120 minutes", "150 minutes", "180 minutes"]),
                    say=["{C}, the {n} runs for {v}.", "The runtime of the {n} {c} is {v}."],
                    ask=["How long does the {n} run {c}?", "What is the runtime of the {n} {c}?"],
                    hedge=["{C}, the {n} runs for less time, but the manual gives no number."]),
    "dustbin": dict(label="dustbin capacity", keywords=["dustbin"], numeric=True,
                    value=pick(["0.3 litres", "0.4 litres", "0.5 litres", "0.6 litres"]),
                    say=["The dustbin of the {n} holds {v}.", "The {n} has a dustbin of {v}."],
                    ask=["How much does the dustbin of the {n} hold?", "What is the dustbin capacity of the {n}?"],
                    hedge=["The dustbin of the {n} fills up quickly with pet hair; its size is not in the manual."]),
    "noise": dict(label="noise level", keywords=["noise level"], numeric=True,
                  value=pick(["55 dB", "58 dB", "62 dB", "65 dB", "68 dB"]),
                  say=["The noise level of the {n} is {v}.", "I measured a noise level of {v} from the {n}."],
                  ask=["How loud is the {n}?", "What is the noise level of the {n}?"],
                  hedge=["The {n} has a noise level that the maker does not publish."]),
}
# Each product type: its attributes with their conditions (None: the attribute has none) and its weights/prices.
PRODUCT_TYPES = {
    "e-stroller": dict(what="an electric rocking stroller",
                       attrs={"charge_time": None, "battery_life": None,
                              "weight": ["with the rain cover", "without the rain cover"],
                              "max_load": None, "price": None, "warranty": None},
                       weight=(6.0, 12.0, " kg"), price=(299, 899)),
    "smartwatch": dict(what="a smartwatch",
                       attrs={"battery_life": ["with the always-on display enabled",
                                               "with the always-on display disabled"],
                              "charge_time": None, "weight": None, "water_resistance": None, "price": None,
                              "warranty": None},
                       weight=(28, 60, " g"), price=(149, 549)),
    "e-bike": dict(what="a folding e-bike",
                   attrs={"range": ["in eco mode", "in turbo mode"], "charge_time": None,
                          "weight": ["with the battery", "without the battery"], "max_load": None, "price": None,
                          "warranty": None},
                   weight=(14.0, 28.0, " kg"), price=(999, 2999)),
    "earbuds": dict(what="a pair of wireless earbuds",
                    attrs={"battery_life": ["with noise cancelling on", "with noise cancelling off"],
                           "charge_time": None, "weight": None, "water_resistance": None, "price": None,
                           "warranty": None},
                    weight=(4, 7, " g"), price=(79, 299)),
    "robot-vacuum": dict(what="a robot vacuum",
                         attrs={"runtime": ["on the quiet setting", "on the max setting"], "charge_time": None,
                                "dustbin": None, "noise": None, "weight": None, "price": None},
                         weight=(2.5, 4.5, " kg"), price=(249, 1099)),
}
REVIEW_FILLERS = [
    "I bought the {n} in the spring sale and have used it most days since.",
    "Setup took longer than I would like, mostly because of the companion app.",
    "Customer support answered my email the same day, which I did not expect.",
    "The {n} feels solid and the buttons have a satisfying click.",
    "Overall I would buy the {n} again, with a couple of reservations.",
    "The grey colour looks better in person than in the photos.",
    "My partner uses the {n} too and likes it more than I do.",
    "The manual is short but covers what you need.",
    "Delivery was quick and the box was mostly cardboard, which is nice.",
    "The {n} replaced an older model from another brand that had started to fall apart.",
]

# ---------------------------------------------------------------------------------------------------- runbook
# Alert name → what firing means, the metric phrase of its threshold, the threshold values.
ALERTS = {
    "CertificateExpiringSoon": ("a TLS certificate served by one of our endpoints is close to expiry",
                                "the days left on a certificate drop below", ["7 days", "14 days", "21 days",
                                                                             "30 days"]),
    "DiskSpaceLow": ("a volume on a database or queue host is filling up", "disk usage goes above",
                     ["75%", "80%", "85%", "90%"]),
    "HighErrorRate": ("the share of failing requests at the edge has jumped", "the server error rate goes above",
                      ["1%", "2%", "5%", "10%"]),
    "QueueBacklogGrowing": ("workers are not keeping up with the jobs queue", "the queue backlog exceeds",
                            ["5,000 messages", "10,000 messages", "50,000 messages"]),
    "ReplicaLagHigh": ("a read replica has fallen behind its primary", "replication lag exceeds",
                       ["10 seconds", "30 seconds", "60 seconds", "120 seconds"]),
    "LatencyP99High": ("the slowest requests have become much slower", "p99 latency exceeds",
                       ["500 ms", "800 ms", "1,200 ms", "2,000 ms"]),
    "MemoryPressure": ("a service is close to its memory limit", "memory usage goes above",
                       ["85%", "90%", "95%"]),
    "PodCrashLooping": ("a pod keeps restarting", "a pod restarts more than", ["3 times", "5 times", "10 times"]),
    "BackupAgeHigh": ("the last good database backup is too old", "the last good backup is older than",
                      ["26 hours", "30 hours", "48 hours"]),
    "CPUThrottlingHigh": ("containers are being throttled by their CPU quota", "CPU throttling goes above",
                          ["25%", "40%", "50%"]),
    "WebhookDeliveryFailing": ("customer webhook endpoints are rejecting our deliveries",
                               "the webhook failure rate goes above", ["5%", "10%", "20%"]),
    "LabelPrintStalled": ("no shipping label has been rendered for a while", "label rendering has been idle for",
                          ["5 minutes", "10 minutes", "15 minutes"]),
    "SearchIndexStale": ("the search index is behind the database", "the index is older than",
                         ["15 minutes", "30 minutes", "60 minutes"]),
    "TokenRefreshFailing": ("carrier OAuth tokens are not being refreshed", "token refresh failures exceed",
                            ["3 in a row", "5 in a row", "10 in a row"]),
}
ENVIRONMENTS = ["in production", "in staging"]
TEAMS = ["Platform SRE", "Payments Infra", "Core Storage", "Edge Networking", "Data Platform", "Label Services",
         "Identity", "Developer Experience"]
RUNBOOK_ATTRS = [
    dict(key="threshold", label="threshold", keywords=["fires when", "threshold"], numeric=True,
         conditions=ENVIRONMENTS, value=lambda rng, ent, cond: rng.choice(ALERTS[ent][2]),
         say=["{C}, {n} fires when {m} {v}.", "{n} fires when {m} {v} {c}.", "{C}, the threshold of {n} is {v}."],
         ask=["At what threshold does {n} fire {c}?", "What is the threshold of {n} {c}?",
              "When does {n} fire {c}?"],
         hedge=["{C}, the threshold of {n} is tuned per cluster and is not written down here."]),
    dict(key="pending", label="pending period", keywords=["must hold for", "pending period"], numeric=True,
         value=num([1, 2, 5, 10, 15], " minutes"),
         say=["The condition must hold for {v} before {n} pages anyone.", "{n} has a pending period of {v}."],
         ask=["How long must the condition hold before {n} fires?", "What is the pending period of {n}?"],
         hedge=["{n} has a pending period so that short spikes do not page, but its length is set in code."]),
    dict(key="severity", label="severity", keywords=["severity"], numeric=False,
         vocab=["SEV1", "SEV2", "SEV3", "SEV4"], value=pick(["SEV1", "SEV2", "SEV3", "SEV4"]),
         say=["{n} is raised with severity {v}.", "The severity of {n} is {v}."],
         ask=["What severity does {n} have?", "What is the severity of {n}?"], hedge=[]),
    dict(key="escalation", label="escalation time", keywords=["escalat"], numeric=True,
         conditions=["during business hours", "out of hours"], value=num([5, 10, 15, 20, 30], " minutes"),
         say=["{C}, if nobody acknowledges {n} within {v}, it escalates to the secondary on-call.",
              "{n} escalates after {v} without an acknowledgement {c}."],
         ask=["After how long does {n} escalate {c} if nobody acknowledges it?",
              "What is the escalation time of {n} {c}?"],
         hedge=["{C}, {n} escalates to the secondary on-call if it stays unacknowledged, after a delay set in "
                "the paging tool."]),
    dict(key="owner_team", label="owning team", keywords=["owned by", "owning team"], numeric=False,
         vocab=TEAMS, value=pick(TEAMS),
         say=["{n} is owned by the {v} team.", "The owning team for {n} is {v}."],
         ask=["Which team owns {n}?", "What is the owning team of {n}?"], hedge=[]),
]
RUNBOOK_FILLERS = [
    "Start by opening the service dashboard and checking whether the problem is still getting worse.",
    "Look at the deploys of the last hour before you change anything.",
    "Post a short update in the incident channel every half hour while {n} is active.",
    "If a customer has noticed, ask the support lead to pin a status page notice.",
    "Do not silence {n} without writing down why in the incident log.",
    "Most of the time the cause is a recent config change, so roll that back first.",
    "When it is over, write a short note in the on-call handover.",
    "The dashboards live in Grafana under the team folder.",
]

# ---------------------------------------------------------------------------------------------------- policy
# Region → (condition phrase, currency).
REGIONS = {"UK": ("in the UK", "£"), "US": ("in the US", "$"), "Germany": ("in Germany", "€"),
           "France": ("in France", "€"), "Singapore": ("in Singapore", "S$"), "Canada": ("in Canada", "C$"),
           "Netherlands": ("in the Netherlands", "€"), "Australia": ("in Australia", "A$")}
# Entity → (policy document it belongs to, how its amount is drawn: ("money", lo, hi, step, unit) or
# ("count", values, unit)).
POLICY_ENTITIES = {
    "hotel allowance": ("Travel policy", ("money", 110, 240, 10, " per night")),
    "meal allowance": ("Travel policy", ("money", 30, 75, 5, " per day")),
    "mileage rate": ("Travel policy", ("cents", [0.30, 0.35, 0.42, 0.45, 0.58, 0.67], " per mile")),
    "home-office stipend": ("Remote work policy", ("money", 300, 900, 50, " per year")),
    "phone allowance": ("Remote work policy", ("money", 20, 60, 5, " per month")),
    "laptop budget": ("Equipment policy", ("money", 1200, 2600, 100, " every three years")),
    "training budget": ("Learning policy", ("money", 800, 3000, 100, " per year")),
    "parental leave": ("Leave policy", ("count", [12, 16, 18, 20, 24, 26, 30], " weeks")),
    "sick leave": ("Leave policy", ("count", [8, 10, 12, 15, 20], " days")),
    "bereavement leave": ("Leave policy", ("count", [3, 5, 7, 10], " days")),
    "relocation allowance": ("Relocation policy", ("money", 2000, 8000, 500, "")),
    "conference allowance": ("Learning policy", ("money", 500, 2000, 100, " per event")),
}
APPROVERS = ["their line manager", "the finance team", "People Ops", "the department head", "the CFO"]
POLICY_ATTRS = [
    dict(key="amount", label="amount", keywords=["capped at", "entitled to", "comes to", "set at"], numeric=True,
         conditions="regions", value=None,
         say=["{C}, the {n} is capped at {v}.", "Employees based {c} are entitled to a {n} of {v}.",
              "{C}, the {n} comes to {v}.", "The {n} {c} is set at {v}."],
         ask=["What is the {n} {c}?", "How much is the {n} {c}?", "What are employees {c} entitled to as {n}?"],
         hedge=["{C}, the {n} is set at a local figure that People Ops shares on request."]),
    dict(key="approver", label="approver", keywords=["approv", "signed off"], numeric=False, vocab=APPROVERS,
         value=pick(APPROVERS),
         say=["Claims under the {n} are approved by {v}.", "Any use of the {n} must be signed off by {v}."],
         ask=["Who approves the {n}?", "Who has to sign off the {n}?"], hedge=[]),
    dict(key="deadline", label="request deadline", keywords=["submitted within", "deadline"], numeric=True,
         value=num([14, 30, 45, 60, 90], " days"),
         say=["Requests for the {n} must be submitted within {v}.", "The deadline for the {n} is {v}."],
         ask=["Within how many days must requests for the {n} be submitted?", "What is the deadline for the {n}?"],
         hedge=["Requests for the {n} have a deadline too, which finance announces each year."]),
    dict(key="eligibility", label="qualifying period", keywords=["eligible", "qualifying period"], numeric=True,
         value=num([1, 3, 6, 12], " months"),
         say=["Staff become eligible for the {n} after {v} of service.",
              "The qualifying period for the {n} is {v}."],
         ask=["How long must staff work before they are eligible for the {n}?",
              "What is the qualifying period for the {n}?"],
         hedge=["There is a qualifying period for the {n}, and it differs for contractors."]),
]
POLICY_FILLERS = [
    "This policy applies to every employee on a permanent or fixed-term contract.",
    "Contractors should check their agreement, which takes precedence over this page.",
    "Keep receipts for everything you claim; a photo in the expenses tool is enough.",
    "The policy is reviewed once a year by People Ops and Finance together.",
    "If something is not covered here, ask in the people-ops channel before you spend the money.",
    "Exceptions are possible but rare, and they are written down in the employee's file.",
    "We would rather you ask a question than guess.",
]

# ---------------------------------------------------------------------------------------------------- ticket
CUSTOMER_PREFIXES = ["Northwind", "Bluebell", "Harbor", "Summit", "Lakeside", "Redwood", "Copperfield",
                     "Silverline", "Maple", "Oakridge", "Kingfisher", "Larkspur"]
CUSTOMER_SUFFIXES = ["Foods", "Freight", "Dental", "Dairy", "Logistics", "Labs", "Outfitters", "Pharmacy",
                     "Studios", "Supply"]
PLANS = ["Starter", "Growth", "Business", "Enterprise", "Scale", "Team"]
RESOLUTIONS = ["re-issuing the API key", "clearing the label cache", "replaying the failed webhooks",
               "restoring the deleted address book", "raising the upload limit on the account",
               "moving the account to the EU region", "resetting two-factor authentication",
               "merging the duplicate accounts", "re-syncing the carrier credentials", "rebuilding the search index",
               "reverting the printer driver", "correcting the VAT number on the account"]
AGENTS = ["Maya Lindqvist", "Tom Okafor", "Priya Raman", "Jonas Weber", "Aisha Bello", "Lucas Moreau",
          "Hannah Cole", "Diego Alvarez", "Mei Tanaka", "Sam O'Neill"]
ISSUES = ["their label printer started printing blank pages", "webhooks stopped arriving after a deploy",
          "a bulk import of addresses failed half way", "invoices showed the wrong currency",
          "two users could no longer sign in", "tracking pages showed another customer's logo",
          "rates for one carrier came back empty", "a batch of labels was charged twice"]
TICKET_ATTRS = [
    dict(key="plan", label="plan", keywords=["plan"], numeric=False, vocab=PLANS, value=pick(PLANS),
         say=["{n} is on the {v} plan.", "For context, {n} pays for the {v} plan."],
         ask=["Which plan is {n} on?", "What plan does {n} pay for?"], hedge=[]),
    dict(key="seats", label="number of seats", keywords=["seats"], numeric=True,
         value=num([5, 10, 12, 25, 40, 60, 150, 300], " seats"),
         say=["Their account at {n} has {v}.", "{n} currently pays for {v}."],
         ask=["How many seats does {n} have?", "How many seats does {n} pay for?"],
         hedge=["{n} added seats during the quarter; the current count is in the billing console."]),
    dict(key="resolution", label="resolution", keywords=["resolved by", "the fix was"], numeric=False,
         vocab=RESOLUTIONS, value=pick(RESOLUTIONS),
         say=["The ticket from {n} was resolved by {v}.", "For {n}, the fix was {v}."],
         ask=["How was the ticket from {n} resolved?", "What fixed the problem {n} reported?"], hedge=[]),
    dict(key="credit", label="credit", keywords=["credit"], numeric=True, value=None,
         say=["As an apology, {n} received a credit of {v}.", "We applied a credit of {v} to the account of {n}."],
         ask=["How much credit did {n} receive?", "What credit was applied to the account of {n}?"],
         hedge=["A goodwill credit for {n} was discussed, and finance will decide on it."]),
    dict(key="assignee", label="assignee", keywords=["assigned to", "handled by"], numeric=False, vocab=AGENTS,
         value=pick(AGENTS),
         say=["The ticket from {n} was assigned to {v}.", "{n} was handled by {v} from start to finish."],
         ask=["Who handled the ticket from {n}?", "Who was the ticket from {n} assigned to?"], hedge=[]),
    dict(key="open_for", label="time to close", keywords=["closed after", "stayed open for"], numeric=True,
         value=num([2, 4, 6, 9, 18, 26, 48, 72], " hours"),
         say=["The ticket from {n} was closed after {v}.", "The case with {n} stayed open for {v}."],
         ask=["How long did the ticket from {n} stay open?", "After how long was the ticket from {n} closed?"],
         hedge=["The ticket from {n} was closed after a long back and forth; the exact time is in the help desk."]),
]
TICKET_FILLERS = [
    "The customer attached screenshots and a HAR file, which helped a lot.",
    "We asked for the request ids of a few failing calls.",
    "The first reply went out with the standard troubleshooting checklist.",
    "Engineering confirmed nothing else was affected.",
    "The customer thanked the team and asked for a short write-up for their own records.",
    "A follow-up was scheduled to make sure the problem did not come back.",
    "Nothing in the status page history matched the timing.",
]

# ---------------------------------------------------------------------------------------------------- chat
PROJECTS = ["Project Falcon", "Project Heron", "Project Kite", "Project Osprey", "Project Wren", "Project Lark",
            "Project Ibis", "Project Plover", "Project Egret", "Project Robin", "Project Swift", "Project Merlin"]
OWNERS = ["Ana Costa", "Ben Hughes", "Chloe Martin", "Dev Patel", "Elif Yilmaz", "Felix Braun", "Grace Kim",
          "Hugo Silva", "Ines Duarte", "Jack Murphy"]
DECISIONS = ["move the database to Postgres 16", "drop support for iOS 15", "switch the job queue to Kafka",
             "keep the old pricing page for another quarter", "run the pilot in two cities first",
             "build the admin screens in the existing console", "buy the carrier integration instead of building it",
             "ship the feature behind a flag", "hire a contractor for the migration", "pause the mobile app redesign"]
LAUNCH_PHASES = ["beta launch", "GA launch"]
SPEAKERS = ["Nora", "Omar", "Paula", "Quentin", "Rosa", "Stefan", "Tariq", "Uma", "Viktor", "Wendy"]
CHAT_ATTRS = [
    dict(key="owner", label="owner", keywords=["owner", "owned by"], numeric=False, vocab=OWNERS,
         value=pick(OWNERS),
         say=["{v} is the owner of {n} from now on.", "{n} is owned by {v}."],
         ask=["Who owns {n}?", "Who is the owner of {n}?"], hedge=[]),
    dict(key="launch", label="launch date", keywords=["launch"], numeric=True, conditions=LAUNCH_PHASES,
         value=lambda rng, ent, cond: date(rng, (2025,)),
         say=["The {c} of {n} is set for {v}.", "We moved the {c} of {n} to {v}.",
              "Confirmed: {n} has its {c} on {v}."],
         ask=["When is the {c} of {n}?", "What date was agreed for the {c} of {n}?",
              "On what date is the {c} of {n}?"],
         hedge=["The {c} of {n} depends on the security review, so nobody wants to name a day yet."]),
    dict(key="budget", label="budget", keywords=["budget"], numeric=True, conditions=["for the third quarter",
         "for the fourth quarter"],
         value=None,
         say=["The budget for {n} {c} is {v}.", "{C}, {n} gets a budget of {v}."],
         ask=["What is the budget for {n} {c}?", "How much budget does {n} get {c}?"],
         hedge=["Finance still has to confirm the budget for {n} {c}."]),
    dict(key="headcount", label="number of engineers", keywords=["engineers"], numeric=True,
         value=num([2, 3, 4, 5, 6, 8], " engineers"),
         say=["{n} will be staffed with {v}.", "We agreed to put {v} on {n}."],
         ask=["How many engineers are assigned to {n}?", "How many engineers will work on {n}?"],
         hedge=["{n} needs more engineers, but the number is still being negotiated."]),
    dict(key="decision", label="decision", keywords=["decided to", "decision"], numeric=False, vocab=DECISIONS,
         value=pick(DECISIONS),
         say=["For {n} we decided to {v}.", "Decision on {n}: {v}."],
         ask=["What was decided about {n}?", "What decision was taken on {n}?"], hedge=[]),
]
CHAT_FILLERS = [
    "I will share the slides after the call.",
    "Can we keep this meeting to thirty minutes next time?",
    "Thanks everyone, good progress this week.",
    "Let's take the rest of that discussion offline.",
    "Reminder that the office is closed on Friday.",
    "I'll write this up in the wiki so the other teams can see it.",
    "Quick note: the design review moved to the big meeting room.",
    "Any blockers before we wrap up?",
]

DOMAINS = ["runbook", "api", "ticket", "policy", "review", "chat"]
