"""A labelled query set for recall quality: a small corpus of events and frame bodies
(Chinese, English, mixed; names and numbers; near-duplicates; retired content) and
queries with the documents a person would expect to find.

Distractors are deliberate: documents that share single characters with the words
ICU splits apart (沙发/沙漠 vs 沙箱, 超市 vs 超时, 重新/试验 vs 重试), and
near-duplicates that differ only in a region, version or number.
"""
from __future__ import annotations

# id -> text. Ids starting with "r-" stand for retired events/frames: still searchable.
DOCS: dict[str, str] = {
    # sandbox / permission
    "sb1": "沙箱权限配置失败：容器无法挂载 /data 目录",
    "sb2": "sandbox permission denied when mounting /data in the build container",
    "sb3": "修复沙箱权限：给 runner 用户加上 docker 组，重新构建后通过",
    "r-sb4": "旧方案：关闭沙箱隔离来绕过权限问题（已废弃）",
    "sb5": "部署到 cn-hangzhou 时沙箱权限检查失败 sandbox permission check failed",
    "d-sb1": "客厅的沙发需要清洁，沙发垫已经送洗",
    "d-sb2": "沙漠徒步路线：带足饮水，注意箱子重量",
    "d-sb3": "快递箱子放在门口，邮箱里有取件码",
    "d-sb4": "权利与义务：合同第三条规定了双方的权利",
    # timeout / retry
    "to1": "支付接口超时，重试三次后仍然失败",
    "to2": "payment API timed out; retried 3 times then gave up",
    "to3": "把重试间隔改成指数退避，超时从 5 秒调到 15 秒",
    "r-to4": "临时把超时关掉了，之后要恢复（已撤销）",
    "d-to1": "超市周末打折，牛奶和鸡蛋便宜",
    "d-to2": "重新安排会议时间到下午三点",
    "d-to3": "新产品试验在实验室进行，测试数据待整理",
    "d-to4": "时间管理：每天早上列出三件最重要的事",
    # release / build (the README walk-through)
    "rel1": "release-procedure: 测试通过后构建，核验本次产物，再打包。",
    "r-rel2": "release-case-a: npm test; npm run build; artifact dist/ 单包项目",
    "r-rel3": "release-case-b: pnpm --filter web test; pnpm --filter web build; apps/web/dist/ 工作区",
    "rel4": "回归测试报告：120 个用例全部通过，可以进入打包阶段",
    "rel5": "regression test report: 120 passed, 0 failed, ready for packaging",
    "rel6": "发布 v1.2.3 到生产环境，回滚方案是 v1.2.2",
    "rel7": "released v1.2.4 to staging; production still on v1.2.3",
    "rel8": "发布 v2.0.0 前需要数据库迁移",
    # regions and deployment near-duplicates
    "dep1": "deployment/current: region cn-hangzhou, 3 replicas, image web:1.8",
    "r-dep2": "deployment/old: region cn-shanghai, 2 replicas, image web:1.6",
    "dep3": "部署到 cn-beijing 的流量切换计划，周五晚上执行",
    "dep4": "cn-hangzhou 可用区 b 的磁盘告警已经处理",
    "dep5": "us-west-2 deployment finished, latency p99 120 ms",
    # people, orders, incidents
    "ppl1": "张伟负责支付系统的值班，电话在通讯录里",
    "ppl2": "Alice Chen owns the search service and reviews index changes",
    "ppl3": "张伟和 Alice Chen 约好周三讨论召回排序",
    "ord1": "订单 58231 退款失败，客户已经投诉两次",
    "ord2": "order 58231 refund retried after the gateway fix",
    "ord3": "订单 58213 正常发货，物流单号已同步",
    "inc1": "INC-2041: 检索服务延迟升高，原因是索引合并",
    "inc2": "INC-2041 postmortem: index merge starved the search threads",
    "inc3": "INC-2014: 登录服务证书过期，已续签",
    "ref1": "@e42 的测试日志显示构建产物缺少 manifest",
    "ref2": "see @e42 for the original build log",
    "ref3": "@e24 是用户最初的请求：先暂停发布",
    # memory / recall / context
    "mem1": "记忆整理：把两次发布经验归纳成可复用流程",
    "mem2": "the agent retired the old release cases after writing the procedure",
    "mem3": "召回结果先作为观察进入收件箱，提升为认知需要显式事务",
    "mem4": "recall results arrive as observations; promoting them needs a transaction",
    "mem5": "上下文压力过高时，先整理观察记录再执行新的动作",
    # config / secrets / db
    "cfg1": "配置中心的密钥轮换失败，旧密钥仍在使用",
    "cfg2": "secret rotation failed in the config service; old key still active",
    "cfg3": "数据库连接池耗尽，查询排队超过 2 秒",
    "cfg4": "database connection pool exhausted; queries queued for 2 s",
    "cfg5": "缓存命中率从 95% 降到 60%，怀疑是键名变更",
    "cfg6": "cache hit ratio dropped from 95% to 60% after the key rename",
    # misc distractors
    "x1": "今天天气晴朗，适合户外跑步",
    "x2": "the weather is fine, good for a run outside",
    "x3": "周报：本周完成了三个需求，下周继续优化",
    "x4": "weekly report: three features done, more tuning next week",
    "x5": "会议纪要：讨论了预算和招聘计划",
    "x6": "权限申请流程：提交工单，主管审批",
    "x7": "容器镜像仓库清理了 30 天前的标签",
    "x8": "build cache cleaned; container registry pruned",
    # Characters of the target words, used apart (ICU emits them one by one too).
    "c1": "黄沙吹进了箱里，箱上全是沙",
    "c2": "沙雕摆在箱旁边",
    "c3": "一箱沙，沙和箱",
    "c4": "黄沙漫天的沙雕节，箱",
    "c5": "限速标志和权重表",
    "c6": "权重调高，限速放宽，权和限",
    "c7": "超车时要注意后方",
    "c8": "他超车的时候没有打灯，超车时",
    "c9": "重启之后再试一次",
    "c10": "重启两次，试穿一下，先重启，再试",
    "c11": "退货的款已经到账",
    "c12": "轮班表按周轮换",
    "c13": "打完包再走，包",
    "c14": "产线的物料到了，产",
    "c15": "时速超过限速，超车",
    "c16": "保密的钥匙交给门卫",
    "c17": "沙箱游戏的设计文档，权限无关",
    "c18": "门卫交接班时检查箱包",
}

# Generated filler (fixed seed): everyday sentences built from phrases in which ICU
# emits the characters of 沙箱, 权限, 超时, 重试, 密钥... one by one.
_PHRASES = ["黄沙吹进了箱里", "沙雕摆在箱旁边", "限速标志", "权重调高", "超车时要注意",
            "重启之后", "试穿一下", "退货的款", "轮班表", "打完包再走", "产线的物料",
            "保密的钥匙", "门卫交接", "天气晴朗", "会议纪要", "预算和招聘", "周报", "客户来访",
            "系统升级通知", "网络维护窗口", "办公室搬迁", "午餐订餐", "年度体检", "培训课程",
            "the office moves", "lunch order", "training course", "network maintenance",
            "quarterly budget", "team offsite"]


def _filler(n: int, seed: int = 4) -> dict[str, str]:
    import random
    rng = random.Random(seed)
    return {f"g{i}": "，".join(rng.sample(_PHRASES, rng.randint(2, 5))) for i in range(n)}


DOCS.update(_filler(240))

# (query, relevant doc ids)
QUERIES: list[tuple[str, set[str]]] = [
    # Chinese words ICU cuts into characters
    ("沙箱", {"sb1", "sb3", "r-sb4", "sb5"}),
    ("沙箱 权限", {"sb1", "sb3", "r-sb4", "sb5"}),
    ("沙箱权限配置失败", {"sb1", "sb5"}),
    ("超时", {"to1", "to3", "r-to4"}),
    ("重试", {"to1", "to3"}),
    ("超时 重试", {"to1", "to3", "r-to4"}),
    ("支付 超时", {"to1"}),
    ("打包", {"rel1", "rel4"}),
    ("产物", {"rel1", "ref1"}),
    ("退款", {"ord1"}),
    ("物流", {"ord3"}),
    ("密钥 轮换", {"cfg1"}),
    ("连接池", {"cfg3"}),
    ("命中率", {"cfg5"}),
    ("索引合并", {"inc1"}),
    ("证书 过期", {"inc3"}),
    ("观察 事务", {"mem3"}),
    ("上下文 压力", {"mem5"}),
    ("归纳 流程", {"mem1"}),
    ("回归测试", {"rel4"}),
    # English
    ("sandbox permission", {"sb2", "sb5"}),
    ("timed out retried", {"to2"}),
    ("regression test report", {"rel5"}),
    ("secret rotation", {"cfg2"}),
    ("connection pool exhausted", {"cfg4"}),
    ("cache hit ratio", {"cfg6"}),
    ("postmortem index merge", {"inc2"}),
    ("recall observations transaction", {"mem4"}),
    ("retired release cases", {"mem2"}),
    ("staging", {"rel7"}),
    # mixed
    ("sandbox 权限", {"sb1", "sb2", "sb3", "r-sb4", "sb5"}),
    ("payment 超时", {"to1", "to2"}),
    ("npm test 单包", {"r-rel2"}),
    ("pnpm 工作区", {"r-rel3"}),
    ("release-procedure 打包", {"rel1"}),
    # names, identifiers, numbers
    ("cn-hangzhou", {"dep1", "dep4", "sb5"}),
    ("cn-shanghai", {"r-dep2"}),
    ("v1.2.3", {"rel6", "rel7"}),
    ("v2.0.0 迁移", {"rel8"}),
    ("@e42", {"ref1", "ref2"}),
    ("58231", {"ord1", "ord2"}),
    ("INC-2041", {"inc1", "inc2"}),
    ("张伟", {"ppl1", "ppl3"}),
    ("Alice Chen", {"ppl2", "ppl3"}),
    ("us-west-2 latency", {"dep5"}),
    # retired content
    ("关闭沙箱隔离", {"r-sb4"}),
    ("deployment old shanghai", {"r-dep2"}),
]
