"""The bulk of a long agent history (generated, fixed seed): the day-to-day notes of
the workstreams in hybrid_set.py, written the way a team writes them, each note a
few remarks on one workstream, now in Chinese, now in English, often both.

Report only (hybrid_eval.py --background N): these notes are unlabelled, and many
answer a labelled query as well as its target does ("rollout paused for the weekend"
for "when did we decide to hold the launch"), so recall against the labels
understates every leg once they are in; the quality gate runs without them.
"""
from __future__ import annotations

import random

_REMARKS: dict[str, list[str]] = {
    "release": [
        "release train for this sprint is on track", "发布说明还差两条", "launch date confirmed with product",
        "changelog updated for the next version", "灰度比例调到 50%", "rollout paused for the weekend",
        "版本号打好 tag 了", "waiting on QA sign-off before we ship", "上线前检查清单过了一遍",
        "hotfix branch cut from the release tag", "新版本在应用商店审核中", "go/no-go meeting at 16:00",
        "ship it after the smoke tests pass", "发布延期一天，等测试结果", "canary metrics look normal",
    ],
    "payments": [
        "payment success rate 99.2% today", "支付渠道回调偶尔延迟", "refund queue drained",
        "checkout latency p95 at 800 ms", "对账发现三笔差异", "card declines up slightly in Brazil",
        "payment provider sent a maintenance notice", "支付告警阈值调高了一点", "charge retries look normal",
        "gateway timeout alerts quiet since the fix", "结算报表已发给财务", "billing webhook signature verified",
    ],
    "database": [
        "database CPU at 55% during peak", "慢查询数量比上周少", "connection count stable around 180",
        "vacuum finished on the events table", "主从延迟正常", "index bloat checked on orders",
        "query plans reviewed for the reporting jobs", "数据库备份校验通过", "pool saturation alert did not fire today",
        "schema change reviewed: add nullable column", "表结构变更需要评审", "replica promoted in the failover drill",
    ],
    "search": [
        "search p99 at 180 ms", "索引大小 42 GB", "merge policy unchanged",
        "relevance feedback collected from support", "搜索召回率抽查 20 条", "query log sampled for ranking review",
        "tokenizer tests pass for Chinese and English", "重建索引的进度条做好了", "segment count back to normal",
        "ranking tweak under review", "同义词表整理中", "search results cached for the home page",
    ],
    "security": [
        "certificate inventory reviewed", "密钥到期提醒已设置", "access review for admin accounts done",
        "token scopes tightened for the CI bot", "安全扫描没有高危漏洞", "login anomaly alerts tuned",
        "secrets moved to the vault", "证书还有 60 天到期", "SSO group mapping updated",
        "password policy: 12 characters minimum", "双因素认证覆盖率 96%", "audit log exported for compliance",
    ],
    "infra": [
        "cluster autoscaler added two nodes overnight", "节点内存使用率 70%", "pods restarted after the config change",
        "DNS records cleaned up", "扩容脚本跑完了", "replicas scaled back to 4 after the event",
        "CDN hit rate 93%", "机房网络抖动了几分钟", "deployment pipeline green",
        "memory limits added to the worker", "负载均衡健康检查调整", "traffic shifted to the new region gradually",
    ],
    "support": [
        "support queue at 60 tickets", "客户满意度 4.6", "refund requests handled within a day",
        "escalation from an enterprise customer", "工单平均响应 2 小时", "FAQ updated for the export feature",
        "customer call scheduled for Thursday", "投诉率下降", "SLA report sent to the account manager",
        "spam complaints about our emails checked", "客户要求发票重开", "bug report reproduced and filed",
    ],
    "cost": [
        "cloud spend this week within budget", "费用看板更新了", "idle instances shut down",
        "storage growth 3% week over week", "预算评审下周", "GPU usage report sent to finance",
        "cost alerts at 80% of the monthly budget", "账单按团队打标签", "savings plan under evaluation",
        "log retention shortened to save storage", "云资源清理了一批", "reserved capacity renewal due in June",
    ],
    "people": [
        "1:1 notes filed", "招聘进度：三个岗位在面试", "on-call rotation published for next month",
        "interview loop scheduled for the frontend role", "团队建设活动报名中", "new hire starts Monday",
        "leave calendar updated", "值班表更新了", "candidate feedback collected",
        "weekly sync notes shared", "周会纪要已发", "mentor assigned to the new engineer",
    ],
    "ci": [
        "CI green on main", "流水线平均 12 分钟", "flaky test quarantined",
        "build cache hit rate 85%", "依赖升级合并了", "end-to-end suite passed on staging",
        "test coverage at 78%", "构建产物签名校验通过", "lint rules tightened",
        "pipeline retried once after a runner crash", "测试环境数据重置", "packaging step checks the manifest",
    ],
    "migration": [
        "backfill at 40%", "迁移脚本第二批跑完", "backup verified by checksum",
        "restore test scheduled for Friday", "分库路由表更新", "dual writes enabled for the users table",
        "备份保留策略检查过", "migration rollback plan reviewed", "数据校验没有差异",
        "snapshot taken before the schema change", "冷备份转存完成", "shard rebalance finished",
    ],
    "agent": [
        "context pressure at 60%", "整理了本周的观察", "user preferences re-read before answering",
        "summarized the thread for the user", "提醒用户周五不要上线", "notes merged into the procedure",
        "answer kept short as the user likes", "记忆整理完成", "follow-up task created",
        "asked the user to confirm the plan", "任务清单更新", "retired an outdated note",
    ],
}


_WHO = ["张伟", "李娜", "Alice", "Bob", "王芳", "Chen", "the agent", "刘洋"]
_DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "周一", "周三", "周五"]


def background(n: int, seed: int = 15) -> dict[str, str]:
    rng = random.Random(seed)
    streams = sorted(_REMARKS)
    out = {}
    for i in range(n):
        remarks = _REMARKS[streams[rng.randrange(len(streams))]]
        detail = rng.choice([f"(#{rng.randrange(1000, 9999)})", f"— {rng.choice(_WHO)}",
                             f"[{rng.choice(_DAYS)}]", ""])
        out[f"bg{i}"] = "; ".join(rng.sample(remarks, rng.randint(1, 2))) + " " + detail
    return out
