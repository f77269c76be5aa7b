"""Every key scheme, in one place: topic keys, table keys and the feature view's keys.

Nothing else formats a key. A call's events and state live under its call key, so they share a
partition; facts about a protected number under its number key; alerts and billing under the account.
"""

from __future__ import annotations


def call(account: str, call_id: str) -> str:
    """Events topic, calls and sweeps tables, a call's questions."""
    return f"{account}:{call_id}"


def split_call(key: str) -> tuple[str, str]:
    account, call_id = key.split(":", 1)
    return account, call_id


def number(account: str, protected: str) -> str:
    """Decisions topic and the detector's window table."""
    return f"{account}:{protected}"


def alert(account: str, alert_id: str) -> str:
    """The alert store."""
    return f"alert|{account}|{alert_id}"


def index_range(space: str, account: str, partition: int) -> tuple[str, str]:
    """Every entry of an account's index in one partition, as a (low, high) range of keys."""
    low = f"idxe|{space}|{account}|{partition}|"
    # "}" is the character after "|": the first key past every key that starts with `low`.
    return low, low[:-1] + "}"


def index_hour(space: str, account: str, partition: int, hour: int) -> str:
    """Where one hour's entries start; each entry's key is this and its item's id. The hour is written in
    13 digits so that keys sort as their hours do (`domain.index`, range reads)."""
    return f"idxe|{space}|{account}|{partition}|{hour:013d}|"


def index_entry(space: str, account: str, partition: int, hour: int, item_id: str) -> str:
    """One entry of an hour, under its item's id: a refold writes the same key again."""
    return index_hour(space, account, partition, hour) + item_id


def account_day(account: str, day: int) -> str:
    """An account's records of one day, in the horizon's index (`domain.horizon`)."""
    return f"{day}|{account}"


def split_account_day(name: str) -> tuple[str, int]:
    day, account = name.split("|", 1)
    return account, int(day)


def echo(number_key: str, fact_id: str) -> str:
    """What a fact raised on a number, beside the number's window (`domain.detectors.Echo`)."""
    return f"echo|{number_key}|{fact_id}"


class View:
    """Keys of the feature view (`domain.features`): every worker's copy of the decisions topic."""

    @staticmethod
    def decision(account: str, call_id: str) -> str:
        return f"dec|{account}|{call_id}"

    @staticmethod
    def refusal(event_id: str) -> str:
        return f"ref|{event_id}"

    @staticmethod
    def settled(account: str, call_id: str) -> str:
        return f"set|{account}|{call_id}"

    @staticmethod
    def numbers(account: str) -> str:
        return f"nums|{account}"

    @staticmethod
    def removed(account: str) -> str:
        """When each of the account's removed numbers was removed."""
        return f"rmnums|{account}"

    @staticmethod
    def scored(account: str, day: int) -> str:
        return f"day|{account}|{day}"

    @staticmethod
    def caller_window(account: str, protected: str, caller: str) -> str:
        return f"cw|{account}|{protected}|{caller}"

    @staticmethod
    def history(caller: str) -> str:
        return f"hist|{caller}"

    @staticmethod
    def label(account: str, call_id: str) -> str:
        """What a labelled call counts for in its caller's history (`domain.labels.Mark`)."""
        return f"lab|{account}|{call_id}"

    @staticmethod
    def own(account: str, caller: str) -> str:
        """A caller's history in one account's live (not `quiet`) calls: its share of the network's."""
        return f"own|{account}|{caller}"

    @staticmethod
    def imported(account: str, caller: str) -> str:
        """A caller's history in one account's `quiet` imports, which the network history never hears of."""
        return f"imp|{account}|{caller}"

    @staticmethod
    def accounts(caller: str) -> str:
        """The list of accounts a caller reached, as views kept it before `network`: read once, then left."""
        return f"accts|{caller}"

    @staticmethod
    def network(caller: str, account: str) -> str:
        """One account a caller reached; the caller's history counts them."""
        return f"net|{caller}|{account}"

    @staticmethod
    def provider(account: str, provider_call_id: str) -> str:
        return f"pcid|{account}|{provider_call_id}"

    @staticmethod
    def hours(account: str, protected: str) -> str:
        return f"hours|{account}|{protected}"

    @staticmethod
    def block(account: str, protected: str, caller: str) -> str:
        return f"block|{account}|{protected}|{caller}"

    @staticmethod
    def patterns(account: str, protected: str) -> str:
        return f"pat|{account}|{protected}"

    @staticmethod
    def charged(fact_id: str) -> str:
        return f"pts|{fact_id}"

    @staticmethod
    def outbound_calls(account: str) -> str:
        """The account's latest outbound starts (time, dialled number): the burst window."""
        return f"obc|{account}"

    @staticmethod
    def one_rings(account: str, caller: str) -> str:
        """When a caller's inbound calls to the account that ended unanswered within seconds ended."""
        return f"ring|{account}|{caller}"

    @staticmethod
    def delivery(alert_id: str) -> str:
        return f"dlv|{alert_id}"

    @staticmethod
    def channels(alert_id: str) -> str:
        return f"chn|{alert_id}"

    @staticmethod
    def offset(topic: str, partition: int) -> str:
        return f"off|{topic}|{partition}"
