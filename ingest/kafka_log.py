"""The edge's log on Kafka: an idempotent producer, followers of the accounts, status and shadow topics, and
the reply path (answers over TCP, or on the replies partition this edge reads; `ingest.replies`)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from aiokafka.errors import KafkaError

from infra.follow import TopicFollower
from infra.kafka import make_producer
from infra.settings import Settings
from ingest.log import Fold, LogUnavailable
from ingest.replies import ReplyRouter


class KafkaLog:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.producer = make_producer(settings)
        self.replies = ReplyRouter(settings, random.randrange(settings.reply_partitions))
        self.edge_id = self.replies.edge_id
        self.followers: list[TopicFollower] = []
        self.waiting: dict[int, str] = {}

    async def start(self, on_account: Fold, on_status: Fold, on_shadow: Fold) -> None:
        accounts = TopicFollower(self.settings, self.settings.topic("accounts"), on_account)
        status = TopicFollower(self.settings, self.settings.topic("status"), on_status)
        shadow = TopicFollower(self.settings, self.settings.topic("shadow"), on_shadow)
        self.followers = [accounts, status, shadow]
        await self.producer.start()
        await self.replies.start()
        for follower in self.followers:
            await follower.start()
        await accounts.caught_up()

    async def stop(self) -> None:
        for follower in self.followers:
            await follower.stop()
        await self.replies.stop()
        await self.producer.stop()

    async def append(self, topic: str, key: str, value: bytes) -> None:
        try:
            await self.producer.send_and_wait(topic, value, key=key.encode())
        except KafkaError as exc:
            raise LogUnavailable(type(exc).__name__) from exc

    async def ask(self, topic: str, key: str, value: bytes, partition: int | None) -> asyncio.Future[dict[str, Any]]:
        corr, future = self.replies.expect()
        try:
            await self.producer.send_and_wait(
                topic, value, key=key.encode(), partition=partition, headers=self.replies.headers(corr)
            )
        except KafkaError as exc:
            self.replies.forget(corr)
            raise LogUnavailable(type(exc).__name__) from exc
        self.waiting[id(future)] = corr
        return future

    def following(self) -> bool:
        return all(follower.alive() for follower in self.followers)

    def forget(self, answer: asyncio.Future[dict[str, Any]]) -> None:
        corr = self.waiting.pop(id(answer), None)
        if corr is not None:
            self.replies.forget(corr)
