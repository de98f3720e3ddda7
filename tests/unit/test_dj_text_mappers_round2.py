"""Data-Juicer's text mappers, round 2: chinese_convert, clean_ip, extract_tables_from_html,
remove_non_chinese_character, remove_repeat_sentences, remove_specific_chars, remove_table_text,
replace_content, sentence_split, text_chunk.

Each op gets Data-Juicer's own test cases (tests/ops/mapper/test_<op>.py at c07c2d7: samples,
parameters, expected outputs; the tokenizer cases of text_chunk are refused by validation here) and
cases on real text (GPL-3, Debian changelogs and docs, glibc's Chinese translations, an EDGAR
filing under samples/) whose expected outputs were worked out by hand from Data-Juicer's documented
rules.  No Ray: ops run on Arrow tables as the runner hands them."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.dag.batch_exec import StreamingOpRunner
from raypress.operators.base import OpKind
from raypress.operators.registry import get_op

MAPPERS = ("chinese_convert_mapper", "clean_ip_mapper", "extract_tables_from_html_mapper",
           "remove_non_chinese_character_mapper", "remove_repeat_sentences_mapper", "remove_specific_chars_mapper",
           "remove_table_text_mapper", "replace_content_mapper", "sentence_split_mapper")
NEEDS = {"chinese_convert_mapper": "opencc", "extract_tables_from_html_mapper": "bs4", "sentence_split_mapper": "punkt"}
SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def op_named(name: str):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    return get_op(name)


def run(name: str, texts: list, **params) -> list:
    cls = op_named(name)
    table = pa.table({"text": pa.array(texts, pa.string())})
    return cls(cls.Params(**params)).process_batch(table).column("text").to_pylist()


def invalid(name: str, **params) -> str:
    cls = op_named(name)
    with pytest.raises(ValidationError) as info:
        cls.Params(**params)
    return str(info.value)


# -- the contract ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", MAPPERS)
def test_registered_mapper_keeps_rows_other_columns_and_nulls(name):
    cls = op_named(name)
    assert cls.name == name and cls.kind is OpKind.MAPPER
    table = pa.table({"id": ["a", "b"], "body": ["x 1.2.3.4", None], "text": ["keep", "me"]})
    out = StreamingOpRunner(cls, cls.Params(text_key="body"), None, "n")(table)
    assert out.num_rows == 2 and out.column("id").to_pylist() == ["a", "b"]
    assert out.column("body").to_pylist()[1] is None
    assert out.column("text").to_pylist() == ["keep", "me"]


def test_declared_packages():
    assert get_op("chinese_convert_mapper").requires == {"opencc": "text"}
    assert get_op("extract_tables_from_html_mapper").requires == {"bs4": "text"}
    assert get_op("sentence_split_mapper").requires == {"punkt": "text"}
    for name in ("clean_ip_mapper", "remove_non_chinese_character_mapper", "remove_repeat_sentences_mapper",
                 "remove_specific_chars_mapper", "remove_table_text_mapper", "replace_content_mapper",
                 "text_chunk_mapper"):
        assert get_op(name).requires == {}, name


# -- chinese_convert_mapper -----------------------------------------------------------------------

CHINESE_CASES = {
    's2t': [
        ('这是几个简体字，会被转换为繁体字', '這是幾個簡體字，會被轉換爲繁體字'),
        ('如果本身都是繁體字就不會被轉換', '如果本身都是繁體字就不會被轉換'),
        ('试试繁体afadf字$#@#和简体字，以及各123213*&dasd種不同字符数字的组合轉換效果', '試試繁體afadf字$#@#和簡體字，以及各123213*&dasd種不同字符數字的組合轉換效果'),
    ],
    't2s': [
        ('這是幾個繁體字，會被轉換爲簡體字', '这是几个繁体字，会被转换为简体字'),
        ('如果本身都是简体字，就不会被转换', '如果本身都是简体字，就不会被转换'),
        ('试试繁体afadf字$#@#和简体字，以及各123213*&dasd種不同字符数字的组合轉換效果', '试试繁体afadf字$#@#和简体字，以及各123213*&dasd种不同字符数字的组合转换效果'),
    ],
    's2tw': [
        ('群贤毕至，少长咸集', '群賢畢至，少長鹹集'),
        ('为你我用了半年的积蓄，漂洋过海来看你', '為你我用了半年的積蓄，漂洋過海來看你'),
        ('米线面粉里面启发吊钩', '米線麵粉裡面啟發吊鉤'),
    ],
    'tw2s': [
        ('群賢畢至，少長鹹集', '群贤毕至，少长咸集'),
        ('為你我用了半年的積蓄，漂洋過海來看你', '为你我用了半年的积蓄，漂洋过海来看你'),
        ('米線麵粉裡面啟發吊鉤', '米线面粉里面启发吊钩'),
    ],
    's2hk': [
        ('群贤毕至，少长咸集', '羣賢畢至，少長鹹集'),
        ('为你我用了半年的积蓄，漂洋过海来看你', '為你我用了半年的積蓄，漂洋過海來看你'),
        ('米线面粉里面启发吊钩', '米線麪粉裏面啓發吊鈎'),
    ],
    'hk2s': [
        ('羣賢畢至，少長鹹集', '群贤毕至，少长咸集'),
        ('為你我用了半年的積蓄，漂洋過海來看你', '为你我用了半年的积蓄，漂洋过海来看你'),
        ('米線麪粉裏面啓發吊鈎', '米线面粉里面启发吊钩'),
    ],
    's2twp': [
        ('网络连接异常，请检查信息安全', '網路連線異常，請檢查資訊安全'),
        ('今年想去新西兰和马尔代夫旅游', '今年想去紐西蘭和馬爾地夫旅遊'),
        ('我打个出租车打到了一辆奔驰，准备在车上吃冰棍和奶酪', '我打個計程車打到了一輛賓士，準備在車上吃冰棒和乳酪'),
    ],
    'tw2sp': [
        ('網路連線異常，請檢查資訊保安', '网络连接异常，请检查信息保安'),
        ('今年想去紐西蘭和馬爾地夫旅遊', '今年想去新西兰和马尔代夫旅游'),
        ('我打個計程車打到了一輛賓士，準備在車上吃冰棒和乳酪', '我打个出租车打到了一辆奔驰，准备在车上吃冰棍和奶酪'),
    ],
    't2tw': [
        ('羣賢畢至，少長鹹集', '群賢畢至，少長鹹集'),
        ('爲你我用了半年的積蓄，漂洋過海來看你', '為你我用了半年的積蓄，漂洋過海來看你'),
        ('米線麪粉裏面啓發吊鉤', '米線麵粉裡面啟發吊鉤'),
    ],
    'tw2t': [
        ('群賢畢至，少長鹹集', '羣賢畢至，少長鹹集'),
        ('為你我用了半年的積蓄，漂洋過海來看你', '爲你我用了半年的積蓄，漂洋過海來看你'),
        ('米線麵粉裡面啟發吊鈎', '米線麪粉裏面啓發吊鈎'),
    ],
    't2hk': [
        ('說他癡人說夢,他深感不悅', '説他痴人説夢,他深感不悦'),
        ('爲你我用了半年的積蓄，漂洋過海來看你', '為你我用了半年的積蓄，漂洋過海來看你'),
        ('一隻憂鬱的臺灣烏龜', '一隻憂鬱的台灣烏龜'),
    ],
    'hk2t': [
        ('説他痴人説夢,他深感不悦', '說他癡人說夢,他深感不悅'),
        ('為你我用了半年的積蓄，漂洋過海來看你', '爲你我用了半年的積蓄，漂洋過海來看你'),
        ('一隻憂鬱的台灣烏龜', '一隻憂鬱的臺灣烏龜'),
    ],
    't2jp': [
        ('他需要修復心臟瓣膜', '他需要修復心臓弁膜'),
        ('舊字體歷史假名遣 新字體現代假名遣', '旧字体歴史仮名遣 新字体現代仮名遣'),
        ('藝術 缺航 飲料罐', '芸術 欠航 飲料缶'),
    ],
    'jp2t': [
        ('他需要修復心臓弁膜', '他需要修復心臟瓣膜'),
        ('旧字体歴史仮名遣 新字体現代仮名遣', '舊字體歷史假名遣 新字體現代假名遣'),
        ('芸術 欠航 飲料缶', '藝術 缺航 飲料罐'),
    ],
}


def test_chinese_convert_data_juicer_cases():
    for mode, cases in CHINESE_CASES.items():
        texts, targets = zip(*cases)
        assert run("chinese_convert_mapper", list(texts), mode=mode) == list(targets), mode


def test_chinese_convert_real_translations():
    # glibc's and sed's zh_CN / zh_TW message catalogues (/usr/share/locale/*/LC_MESSAGES/libc.mo, sed.mo)
    zh_cn = ["没有那个文件或目录", "权限不够", "内存耗尽", "网络不可达", "设备或资源忙"]
    assert run("chinese_convert_mapper", zh_cn) == ["沒有那個文件或目錄", "權限不夠", "內存耗盡", "網絡不可達", "設備或資源忙"]
    # s2twp also swaps Mainland terms for Taiwanese ones: sed's zh_TW catalogue says 記憶體耗盡 for 内存耗尽
    assert run("chinese_convert_mapper", zh_cn[::2], mode="s2twp") == ["沒有那個檔案或目錄", "記憶體耗盡", "裝置或資源忙"]
    zh_tw = ["記憶體用盡", "連線被拒絕", "開啟太多檔案"]  # libc.mo zh_TW
    assert run("chinese_convert_mapper", zh_tw, mode="t2s") == ["记忆体用尽", "连线被拒绝", "开启太多档案"]
    assert run("chinese_convert_mapper", zh_tw, mode="tw2sp") == ["内存用尽", "连接被拒绝", "打开太多文件"]


def test_chinese_convert_modes_are_data_juicers():
    assert "Input should be 's2t', 't2s'" in invalid("chinese_convert_mapper", mode="zh2en")
    assert get_op("chinese_convert_mapper").Params().mode == "s2t"


# -- clean_ip_mapper ------------------------------------------------------------------------------


def test_clean_ip_data_juicer_cases():
    ipv4 = ["test of ip 234.128.124.123", "34.0.124.123", "ftp://example.com/188.46.244.216my-page.html",
            "ft174.1421.237.246my"]
    assert run("clean_ip_mapper", ipv4) == ["test of ip ", "", "ftp://example.com/my-page.html", "ft174.1421.237.246my"]
    ipv6 = ["dd41:cbaf:d1b4:10a0:b215:72e3:6eaf:3ecb", "test of ip 4394:538a:3bf3:61c3:cb0d:d214:526f:70d",
            "com/f770:c52e:ddce:3a9f:8c3b:a7bd:d81f:985cmy-page.html", "ft1926:43a1:fcb5:ees06:ae63:a2a4:c656:d014my"]
    assert run("clean_ip_mapper", ipv6) == ["", "test of ip ", "com/my-page.html", ipv6[3]]
    assert run("clean_ip_mapper", ipv4, repl="<IP>") == [
        "test of ip <IP>", "<IP>", "ftp://example.com/<IP>my-page.html", "ft174.1421.237.246my"]


def test_clean_ip_real_text():
    # /usr/share/doc/systemd/DISTRO_PORTING.md: only full 8-group IPv6 is matched, '::' forms stay
    dns = ("`1.1.1.1`, `8.8.8.8`, `1.0.0.1`, `8.8.4.4`, `2606:4700:4700::1111`, `2001:4860:4860::8888`, "
           "`2606:4700:4700::1001`, `2001:4860:4860::8844`")
    assert run("clean_ip_mapper", [dns]) == [
        "``, ``, ``, ``, `2606:4700:4700::1111`, `2001:4860:4860::8888`, `2606:4700:4700::1001`, "
        "`2001:4860:4860::8844`"]
    # /usr/share/doc/libldap-2.5-0/copyright: no word boundaries, so a dotted version in a Message-id goes too
    assert run("clean_ip_mapper", [" Message-id: <5.2.0.9.0.20030528094229.02924780@127.0.0.1>"]) == [
        " Message-id: <.0.20030528094229.02924780@>"]
    # /usr/share/doc/gnupg/examples/trustlist.txt: a 20-byte fingerprint holds two 8-group "IPv6" runs
    assert run("clean_ip_mapper", ["EA:8D:99:DD:36:AA:2D:07:1A:3C:7B:69:00:9E:51:B9:4A:2E:E7:60  S"]) == [
        "::4A:2E:E7:60  S"]
    # octets stop at 255 (Data-Juicer tries 1xx, 2[0-4]x, 25[0-5], then 2 digits, then 1) and a match may
    # start anywhere: "1.2.3.25" of "1.2.3.256", "0.1.1.1" of "300.1.1.1", "1.2.3.4" of "01.2.3.4"
    assert run("clean_ip_mapper", ["1.2.3.256", "300.1.1.1", "01.2.3.4"], repl="#") == ["#6", "30#", "0#"]


def test_clean_ip_custom_pattern_and_validation():
    assert run("clean_ip_mapper", ["ip: 10.0.0.1"], pattern=r"r'\d+(\.\d+){3}'", repl="<IP>") == ["ip: <IP>"]
    assert run("clean_ip_mapper", ["naïve 1.2.3.4"], pattern=r"\p{L}+", repl="w") == ["w 1.2.3.4"]  # regex syntax
    assert run("clean_ip_mapper", ["10.0.0.1"], repl=r"[\1]") == ["[]"]  # the IPv6 group is there, unmatched
    assert "not a valid regular expression" in invalid("clean_ip_mapper", pattern="(10")
    assert "does not fit pattern" in invalid("clean_ip_mapper", repl=r"\2")


# -- extract_tables_from_html_mapper --------------------------------------------------------------

DJ_HTML = """
    <!DOCTYPE html>
            <html lang="zh">
            <head>
                <meta charset="UTF-8">
                <meta name="viewport" content="width=device-width, initial-scale=1.0">
                <title>表格示例</title>
            </head>
            <body>
                <h1>表格示例</h1>
                <table border="1">
                    <thead>
                        <tr>
                            <th>姓名</th>
                            <th>年龄</th>
                            <th>城市</th>
                        </tr>
                    </thead>
                    <tbody>
                        <tr>
                            <td>张三</td>
                            <td>25</td>
                            <td>北京</td>
                        </tr>
                        <tr>
                            <td>李四</td>
                            <td>30</td>
                            <td>上海</td>
                        </tr>
                        <tr>
                            <td>王五</td>
                            <td>28</td>
                            <td>广州</td>
                        </tr>
                    </tbody>
                </table>
            </body>
            </html>
    """
DJ_ROWS = [["张三", "25", "北京"], ["李四", "30", "上海"], ["王五", "28", "广州"]]


def tables(texts: list, **params) -> list:
    cls = op_named("extract_tables_from_html_mapper")
    out = cls(cls.Params(**params)).process_batch(pa.table({"text": pa.array(texts, pa.string())}))
    return [None if m is None else m[params.get("tables_field_name", "html_tables")]
            for m in out.column("meta").to_pylist()]


def test_extract_tables_data_juicer_cases():
    header = ["姓名", "年龄", "城市"]
    assert tables([DJ_HTML]) == [[[header, *DJ_ROWS]]]
    assert tables([DJ_HTML], include_header=False) == [[DJ_ROWS]]
    assert tables([DJ_HTML + DJ_HTML]) == [[[header, *DJ_ROWS]] * 2]
    assert tables(["<html><body>New testCase - No tables here!</body></html>"]) == [[]]
    many = "<html>" + "".join(f"<table><tr><td>Row {i}</td></tr></table>" for i in range(1000)) + "</html>"
    assert tables([many]) == [[[[f"Row {i}"]] for i in range(1000)]]
    markup = tables([DJ_HTML], retain_html_tags=True)[0]
    assert len(markup) == 1 and markup[0].startswith('<table border="1">\n<thead>\n<tr>\n<th>姓名</th>\n')
    assert markup[0].endswith("<td>广州</td>\n</tr>\n</tbody>\n</table>")  # html.parser keeps one '\n' per gap


def test_extract_tables_real_filing():
    # an EDGAR 8-K cover page (samples/edgar): five tables; cells are XHTML <td/> or wrap inline XBRL tags
    html = (SAMPLES / "edgar" / "BuckleInc.8-K.html").read_text(encoding="utf-8")
    found = tables([html])[0]
    assert len(found) == 5
    assert found[2] == [[""] * 9,
                        ["Title of Each Class", "Trading Symbol(s)", "Name of Each Exchange on Which Registered"],
                        ["Common Stock, $0.01 par value", "BKE", "New York Stock Exchange"]]
    assert found[0][1] == ["Nebraska", "001-12951", "47-0366193"]


def test_extract_tables_meta_struct():
    cls = op_named("extract_tables_from_html_mapper")
    meta = pa.array([{"source": "a", "html_tables": None}, None, {"source": "c", "html_tables": [[["kept"]]]}])
    table = pa.table({"text": ["<table><tr><th>h</th><td>1</td></tr></table>", "<p>none</p>", "<table></table>"],
                      "meta": meta})
    out = cls(cls.Params()).process_batch(table).column("meta").to_pylist()
    assert out == [{"source": "a", "html_tables": [[["h", "1"]]]}, {"source": None, "html_tables": []},
                   {"source": "c", "html_tables": [[["kept"]]]}]  # a row already done is left as it is
    out = cls(cls.Params(tables_field_name="t", retain_html_tags=True)).process_batch(table.drop_columns(["meta"]))
    assert out.schema.field("meta").type == pa.struct([("t", pa.list_(pa.string()))])
    assert out.column("meta").to_pylist()[2] == {"t": ["<table></table>"]}
    assert cls(cls.Params()).columns_written() == ("meta",)


# -- remove_non_chinese_character_mapper ----------------------------------------------------------

NON_CHINESE_A = ["特殊的康熙部首或者扩展部首会被去除，⼏几⺇", "请问你是谁dasoidhao@1264fg.45om",
                 "ftp://exam匹配ple汉字ma-niè包括rdas繁體字h@hqbchd.ckdhnfes.cds",
                 "👊    所有的非汉字a44sh都12@46h会被*&……*qb^4525去掉"]
NON_CHINESE_B = NON_CHINESE_A[:2] + ["f://exam匹配ple汉12字ma-niè包括rdas繁88體字h@hqbchd.ds1", NON_CHINESE_A[3]]
# (keep_alphabet, keep_number, keep_punc), inputs, targets
NON_CHINESE_CASES = [
    ((False, False, False), NON_CHINESE_A, ["特殊的康熙部首或者扩展部首会被去除几", "请问你是谁", "匹配汉字包括繁體字", "所有的非汉字都会被去掉"]),
    ((True, False, False), NON_CHINESE_A,
     ["特殊的康熙部首或者扩展部首会被去除几", "请问你是谁dasoidhaofgom", "ftpexam匹配ple汉字mani包括rdas繁體字hhqbchdckdhnfescds",
      "所有的非汉字ash都h会被qb去掉"]),
    ((False, True, False), NON_CHINESE_B,
     ["特殊的康熙部首或者扩展部首会被去除几", "请问你是谁126445", "匹配汉12字包括繁88體字1", "所有的非汉字44都1246会被4525去掉"]),
    ((False, False, True), NON_CHINESE_B,
     ["特殊的康熙部首或者扩展部首会被去除，几", "请问你是谁.", "//匹配汉字-包括繁體字.", "    所有的非汉字都会被*&*去掉"]),
    ((True, True, False), NON_CHINESE_B,
     ["特殊的康熙部首或者扩展部首会被去除几", "请问你是谁dasoidhao1264fg45om", "fexam匹配ple汉12字mani包括rdas繁88體字hhqbchdds1",
      "所有的非汉字a44sh都1246h会被qb4525去掉"]),
    ((True, False, True), NON_CHINESE_B,
     ["特殊的康熙部首或者扩展部首会被去除，几", "请问你是谁dasoidhaofg.om", "f//exam匹配ple汉字ma-ni包括rdas繁體字hhqbchd.ds",
      "    所有的非汉字ash都h会被*&*qb去掉"]),
    ((False, True, True), NON_CHINESE_B,
     ["特殊的康熙部首或者扩展部首会被去除，几", "请问你是谁1264.45", "//匹配汉12字-包括繁88體字.1", "    所有的非汉字44都1246会被*&*4525去掉"]),
    ((True, True, True), NON_CHINESE_B,
     ["特殊的康熙部首或者扩展部首会被去除，几", "请问你是谁dasoidhao1264fg.45om", "f//exam匹配ple汉12字ma-ni包括rdas繁88體字hhqbchd.ds1",
      "    所有的非汉字a44sh都1246h会被*&*qb4525去掉"]),
]


def test_remove_non_chinese_data_juicer_cases():
    for (alphabet, number, punc), texts, targets in NON_CHINESE_CASES:
        out = run("remove_non_chinese_character_mapper", texts, keep_alphabet=alphabet, keep_number=number,
                  keep_punc=punc)
        assert out == targets, (alphabet, number, punc)


def test_remove_non_chinese_real_text():
    # glibc's zh_CN catalogue (/usr/share/locale/zh_CN/LC_MESSAGES/libc.mo): ASCII ':', '`', "'", '<', '_' and
    # '\n' are not in the kept punctuation; '%', '+', '-', '，', '“', '”' and '。' are
    texts = ["%s 是一个 64 位 ELF 文件。\n", "“%s” 在2017年前的 zic 中模糊不清",
             "%s: 在 `era' 字段的字串 %Zd 中，方向旗标既不是 '+' 也不是 '-'", "%s：<mb_cur_max> 必须大于 <mb_cur_min>\n"]
    assert run("remove_non_chinese_character_mapper", texts) == [
        "%s 是一个 64 位 ELF 文件。", texts[1], "%s 在 era 字段的字串 %Zd 中，方向旗标既不是 + 也不是 -",
        "%s：mbcurmax 必须大于 mbcurmin"]
    assert run("remove_non_chinese_character_mapper", texts[:2], keep_number=False) == [
        "%s 是一个  位 ELF 文件。", "“%s” 在年前的 zic 中模糊不清"]
    assert run("remove_non_chinese_character_mapper", texts, keep_alphabet=False, keep_number=False,
               keep_punc=False) == ["是一个位文件", "在年前的中模糊不清", "在字段的字串中方向旗标既不是也不是", "必须大于"]


# -- remove_repeat_sentences_mapper ---------------------------------------------------------------

REPEAT_DEFAULT_CASES = [
    ('今天天气真不错，阳光明媚，适合出去散步。小明说：“今天天气真不错，我们去海边吧。” 小红回答说：“好主意！” 但是，小李觉得：“今天天气真不错，我们去爬山吧。” 今天天气真不错，阳光明媚，适合出去散步。昨天下了一整天的雨，今天终于放晴了。昨天下了一整天的雨，今天终于放晴了。',
     '今天天气真不错，阳光明媚，适合出去散步。小明说：“今天天气真不错，我们去海边吧。” 小红回答说：“好主意！” 但是，小李觉得：“今天天气真不错，我们去爬山吧。”昨天下了一整天的雨，今天终于放晴了。'),
    ('The quick brown fox jumps over the lazy dog. Isn\'t it amazing how a simple sentence can contain every letter of the alphabet? The quick brown fox jumps over the lazy dog. Speaking of weather, yesterday was quite dreary; however, today is absolutely delightful. Isn\'t it amazing how a simple sentence can contain every letter of the alphabet? "Let\'s seize the day," Tom exclaimed, full of enthusiasm. "Let\'s seize the day," Tom exclaimed, full of enthusiasm.',
     'The quick brown fox jumps over the lazy dog. Isn\'t it amazing how a simple sentence can contain every letter of the alphabet? Speaking of weather, yesterday was quite dreary; however, today is absolutely delightful. "Let\'s seize the day," Tom exclaimed, full of enthusiasm.'),
    ('我很开心 。但是你不开心  。我很开心 。\n你好呀！我很开心 。我好的。你好呀！',
     '我很开心 。但是你不开心  。\n你好呀！我好的。'),
    ('默认配置下，长度低于2的句子不会被去重。去重？去重。去重！重。重...... 重! 1234？3215. 1234. 3. 3. 3',
     '默认配置下，长度低于2的句子不会被去重。去重？重。重...... 重! 1234？3215. 3. 3. 3'),
]
REPEAT_LOWER_NO_SPECIAL_MIN5_CASES = [
    ("Life is what happens when you're busy making other plans. John Lennon once said. Life is what happens when you're busy making other plans. This phrase has resonated with many people over the years. 人生就是当你忙于制定其他计划时发生的事情。对很多人来说，这句话引起了共鸣。",
     "Life is what happens when you're busy making other plans. John Lennon once said. This phrase has resonated with many people over the years. 人生就是当你忙于制定其他计划时发生的事情。对很多人来说，这句话引起了共鸣。"),
    ('The quick brown fox jumps over the lazy dog. Isn\'t it amazing how a simple sentence can contain every letter of the alphabet? The quick brown fox jumps over the lazy dog. Speaking of weather, yesterday was quite dreary; however, today is absolutely delightful. Isn\'t it amazing how a simple sentence can contain every letter of the alphabet? "Let\'s seize the day," Tom exclaimed, full of enthusiasm. "Let\'s seize the day," Tom exclaimed, full of enthusiasm.',
     'The quick brown fox jumps over the lazy dog. Isn\'t it amazing how a simple sentence can contain every letter of the alphabet? Speaking of weather, yesterday was quite dreary; however, today is absolutely delightful. "Let\'s seize the day," Tom exclaimed, full of enthusiasm.'),
    ('我很开心 。但是你不开心  。我很开心 。\n你好呀！我很开心 。我好的。你好呀！',
     '我很开心 。但是你不开心  。\n你好呀！我好的。你好呀！'),
    ('去重？去重。去重！重。重...... 重! 1234？3215. 1234. 3. 3. 3',
     '去重？去重。去重！重。重...... 重! 1234？3215. 1234. 3. 3. 3'),
]


def test_remove_repeat_sentences_data_juicer_cases():
    texts, targets = zip(*REPEAT_DEFAULT_CASES)
    assert run("remove_repeat_sentences_mapper", list(texts)) == list(targets)
    texts, targets = zip(*REPEAT_LOWER_NO_SPECIAL_MIN5_CASES)
    assert run("remove_repeat_sentences_mapper", list(texts), lowercase=True, ignore_special_character=False,
               min_repeat_sentence_length=5) == list(targets)


# /usr/share/doc/alsa-topology-conf/changelog.Debian.gz, three entries
CHANGELOG = """alsa-topology-conf (1.2.5.1-1) unstable; urgency=medium

  * New upstream release.
  * Add bug tracker and repository upstream metadata.

 -- Jordi Mallach <jordi@debian.org>  Wed, 18 Aug 2021 01:07:26 +0200

alsa-topology-conf (1.2.4-1) unstable; urgency=medium

  * New upstream version.
  * Update Standards-Version to 4.5.1, with no changes needed.

 -- Jordi Mallach <jordi@debian.org>  Mon, 07 Dec 2020 22:29:05 +0100

alsa-topology-conf (1.2.3-1) unstable; urgency=medium

  * New upstream release.
  * Update to debhelper compat v13.
"""


def test_remove_repeat_sentences_real_changelog():
    # A '.' before any character but a closing quote ends a sentence, so "(1.2.4-1)" is the sentences
    # "(1." "2." "4-1) ...": the package name's piece and the "-- Jordi Mallach <jordi@debian." of the
    # sign-off lines repeat and go; "2." is one character once special characters are ignored, so it stays.
    assert run("remove_repeat_sentences_mapper", [CHANGELOG]) == ["""alsa-topology-conf (1.2.5.1-1) unstable; urgency=medium

  * New upstream release.
  * Add bug tracker and repository upstream metadata.

 -- Jordi Mallach <jordi@debian.org>  Wed, 18 Aug 2021 01:07:26 +0200

2.4-1) unstable; urgency=medium

  * New upstream version.
  * Update Standards-Version to 4.5.1, with no changes needed.

org>  Mon, 07 Dec 2020 22:29:05 +0100

2.3-1) unstable; urgency=medium


  * Update to debhelper compat v13.
"""]


def test_remove_repeat_sentences_keys():
    text = "Hello there. hello there! Hello, there. 你好。你好！"
    assert run("remove_repeat_sentences_mapper", [text]) == ["Hello there. hello there! 你好。"]
    assert run("remove_repeat_sentences_mapper", [text], lowercase=True) == ["Hello there. 你好。"]
    assert run("remove_repeat_sentences_mapper", [text], ignore_special_character=False) == [
        "Hello there. hello there! Hello, there. 你好。你好！"]
    # "a." " a." " a.": the same key "a" (stripped), long enough with min_repeat_sentence_length=1
    assert run("remove_repeat_sentences_mapper", ["a. a. a."], min_repeat_sentence_length=1) == ["a."]
    assert run("remove_repeat_sentences_mapper", ["a. a. a."]) == ["a. a. a."]


# -- remove_specific_chars_mapper -----------------------------------------------------------------


def test_remove_specific_chars_data_juicer_cases():
    texts = ["这是一个干净的文本。Including Chinese and English.", "◆●■►▼▲▴∆▻▷❖♡□", "►This is a dirty text ▻ 包括中文和英文",
             "多个●■►▼这样的特殊字符可以►▼▲▴∆吗？", "未指定的●■☛₨➩►▼▲特殊字符会☻▷❖被删掉吗？？"]
    assert run("remove_specific_chars_mapper", texts) == [
        texts[0], "", "This is a dirty text  包括中文和英文", "多个这样的特殊字符可以吗？", "未指定的☛₨➩特殊字符会☻被删掉吗？？"]


def test_remove_specific_chars_real_text():
    # /usr/share/doc/valgrind/html/dh-manual.html
    assert run("remove_specific_chars_mapper", ['and has a down arrow (<code class="computeroutput">▼</code>) next']) == [
        'and has a down arrow (<code class="computeroutput"></code>) next']
    # /usr/share/doc/adwaita-icon-theme/copyright: one character, so no '|' joins the class
    bullet = " • to share – to copy, distribute and transmit the work"
    assert run("remove_specific_chars_mapper", [bullet], chars_to_remove="•") == [
        "  to share – to copy, distribute and transmit the work"]
    assert run("remove_specific_chars_mapper", [bullet], chars_to_remove=["•", "–"]) == [
        "  to share  to copy, distribute and transmit the work"]
    # /usr/share/doc/nodejs/api/url.md: Data-Juicer joins the items with '|' inside the class, so with 2+ items
    # (the default has 13) '|' is removed as well
    assert run("remove_specific_chars_mapper", ["| protocol | port |"]) == [" protocol  port "]
    assert run("remove_specific_chars_mapper", ["| protocol | port |"], chars_to_remove="") == ["| protocol | port |"]


def test_remove_specific_chars_class_is_validated():
    assert "not a valid regular expression" in invalid("remove_specific_chars_mapper", chars_to_remove="\\")
    assert run("remove_specific_chars_mapper", ["a1b22c"], chars_to_remove=[r"\d"]) == ["abc"]


# -- remove_table_text_mapper ---------------------------------------------------------------------

# name: (text, line ranges of text.split('\n') that Data-Juicer's target lacks)
TABLE_CASES = {
    'single_table': ('This is a table:\n编号 分行 营运资金1 营运资金2 营运资金3 营运资金4 营运资金5\n① 北京分行 495,000,000.00 200,000,000.00 295,000,000.00 - 495,000,000.00\n② 大连分行 440,000,000.00 100,000,000.00 340,000,000.00 - 440,000,000.00\n③ 重庆分行 500,000,000.00 100,000,000.00 400,000,000.00 - 500,000,000.00\n④ 南京分行 430,000,000.00 100,000,000.00 330,000,000.00 - 430,000,000.00\n⑤ 青岛分行 500,000,000.00 - 100,159,277.60 399,840,722.40 500,000,000.00\nThe end of the table.',
        [(1, 7)]),
    'one_row_text': ('This is a table:\n编号\n①\n②\n③\n④\n⑤\nThe end of the table.',
        []),
    'one_column_text': ('This is a table:\n编号 分行 营运资金1 营运资金2 营运资金3 营运资金4 营运资金5\nThe end of the table.',
        []),
    'smallest_2x2_table': ('This is a table:\n编号 分行\n① 北京分行\nThe end of the table.',
        [(1, 3)]),
    'unaligned_column_num': ('This is a table:\n编号 分行 营运资金1 营运资金2 营运资金3 营运资金4\n① 北京分行 495,000,000.00 200,000,000.00 295,000,000.00 - 495,000,000.00\n② 大连分行 440,000,000.00 100,000,000.00 340,000,000.00 -\n③ 重庆分行 500,000,000.00 100,000,000.00 400,000,000.00 - 500,000,000.00\n④ 南京分行 430,000,000.00 100,000,000.00 - 430,000,000.00\n⑤ 青岛分行 500,000,000.00 - 100,159,277.60 399,840,722.40 500,000,000.00\nThe end of the table.',
        []),
    'false_positive': (
        '平安银行股份有限公司\n'
        '非公开发行普通股认购资金到位情况的验资报告非公开发行普通股认购资金到位情况的验资报告\n'
        '普华永道中天验字(2015)第446号\n'
        '(第一页，共二页)\n'
        '平安银行股份有限公司：\n'
        '平安银行股份有限公司(以下简称“贵公司”)委托中信证券股份有限公司作为主\n'
        '承销商非公开发行普通股 598,802,395 股。我们接受委托，审验了贵公司截至\n'
        '2015年 5月 5日止由中信证券股份有限公司代收取的向境内合格投资者非公开发行\n'
        '普通股认购资金的到位情况。按照国家相关法律、法规的规定以及认购协议、合同\n'
        '的要求出资认购，提供真实、合法、完整的验资资料，保护资产的安全、完整是贵\n'
        '公司管理层及中信证券股份有限公司的责任。我们的责任是对贵公司由中信证券股\n'
        '份有限公司代收取的境内合格投资者本次非公开发行普通股认购资金的到位情况发\n'
        '表审验意见。我们的审验是依据《中国注册会计师审计准则第 1602号——验资》进\n'
        '行的。在审验过程中，我们结合贵公司的实际情况，实施了检查等必要的审验程\n'
        '序。\n'
        '经贵公司 2014 年 7 月 15 日第九届董事会第五次会议提议，2014 年 8 月 4 日\n'
        '2014 年第二次临时股东大会审议通过《平安银行股份有限公司关于非公开发行普\n'
        '通股方案的议案》，贵公司拟向境内合格投资者非公开发行不超过 1,070,663,811\n'
        '股普通股。根据中国证券监督管理委员会证监许可[2015]697 号文《关于核准平安\n'
        '银行股份有限公司非公开发行股票的批复》，贵公司获准向境内合格投资者非公开\n'
        '发行不超过1,070,663,811股普通股。普华永道中天验字(2015)第446号\n'
        '(第二页，共二页)\n'
        '经我们审验，截至 2015 年 5 月 5 日止，贵公司以每股人民币 16.70 元合计向\n'
        '境内合格投资者非公开发行普通股 598,802,395 股，由发行主承销商中信证券股份\n'
        '有限公司代贵公司实际收到人民币 9,999,999,996.50元。所有认购资金均以人民币\n'
        '现金形式汇入。\n'
        '本验资报告仅供贵公司向中国证券监督管理委员会、深圳证券交易所报送资料\n'
        '及向中国证券登记结算有限责任公司深圳分公司申请非公开发行普通股登记时使\n'
        '用，不应将其视为是对贵公司验资报告日后资本保全、偿债能力和持续经营能力等\n'
        '的保证。因使用本验资报告不当造成的后果，与执行本验资业务的注册会计师及会\n'
        '计师事务所无关。\n'
        '附件一 非公开发行普通股认购资金到位情况明细表\n'
        '附件二 验资事项说明\n'
        '附件三 普华永道中天会计师事务所(特殊普通合伙)营业执照\n'
        '附件四 普华永道中天会计师事务所(特殊普通合伙)执业证书\n'
        '附件五 普华永道中天会计师事务所(特殊普通合伙)证券相关业务许可证\n'
        '普华永道中天会计师事务所 注册会计师\n'
        '(特殊普通合伙) 姚文平\n'
        '中国•上海市 注册会计师\n'
        '2015年 5月7日 朱丽平\n'
        '2附件一\n'
        '非公开发行普通股认购资金到位情况明细表\n'
        '截至2015年5月 5日止\n'
        '被审验单位名称：平安银行股份有限公司\n'
        '货币单位：人民币元\n'
        '金额\n'
        '到位认购资金 9,999,999,996.50\n'
        '3附件二\n'
        '验资事项说明\n'
        '一、 基本情况\n'
        '平安银行股份有限公司(以下简称“贵公司”)是中国平安保险(集团)股份有限公司控股的\n'
        '一家跨区域经营的股份制商业银行，是原深圳发展银行股份有限公司以吸收合并原平\n'
        '安银行股份有限公司的方式完成两行整合并更名的银行，总部位于深圳。原深圳发展\n'
        '银行成立于 1987年 12月 22日，并于 1991年 4月 3日在深圳证券交易所上市(股票代\n'
        '码：000001)。\n'
        '贵公司经中国银行业监督管理委员会批准领有 00386413 号金融许可证，机构编码为\n'
        'B0014H144030001，深圳市工商行政管理局批准核发的 440301103098545 号《中华\n'
        '人民共和国企业法人执照》。贵公司注册资本为人民币 13,709,873,744 元，实收资本\n'
        '(股本)为人民币 13,709,873,744元，其中包括有限售条件股份 1,905,819,165 股，无限\n'
        '售条件股份 11,804,054,579 股。贵公司的上述实收资本(股本)已经普华永道中天会计\n'
        '师事务所(特殊普通合伙)审验，并已于 2015 年 4 月 13 日出具普华永道中天验字(2015)\n'
        '第321号验资报告。\n'
        '二、本次非公开发行普通股审批及情况说明\n'
        '于 2014 年 7 月 15 日第九届董事会第五次会议《平安银行股份有限公司关于非公开发\n'
        '行普通股方案的议案》，同意提议股东大会批准贵公司向境内合格投资者非公开发行\n'
        '不超过 1,070,663,811 股普通股。于 2014 年 8 月 4 日 2014 年第二次临时股东大会审\n'
        '议通过，批准了董事会的上述提议。中国证券监督管理委员会于 2015 年 4 月 22 日出\n'
        '具证监许可[2015]697 号文《关于核准平安银行股份有限公司非公开发行股票的批\n'
        '复》核准了贵公司向境内合格投资者非公开发行不超过1,070,663,811股普通股。\n'
        '三、 审验结果\n'
        '经我们审验，截至 2015 年 5 月 5 日止，贵公司已完成普通股 598,802,395 股的发\n'
        '行，每股发行价格为人民币 16.70 元，认购资金合计人民币 9,999,999,996.50 元，全\n'
        '部以人民币现金形式汇入，由发行主承销商中信证券股份有限公司代贵公司收缴，已\n'
        '全部存入主承销商中信证券股份有限公司于平安银行股份有限公司北京分行营业部开\n'
        '立的19014508950004银行账号内。\n'
        '4',
        [(6, 8), (16, 19), (31, 39), (55, 58)]),
    'false_negative': (
        '深圳发展银行股份有限公司关于前次募集资金使用情况\n'
        '的专项说明\n'
        '一、前次募集资金的数额和资金到位时间\n'
        '本行经中国证券监督管理委员会证监公司字[2000]154 号文批准，于 2000\n'
        '年在1998年末总股本1,551,847,092股的基础上，以每10股配3股的比例向全\n'
        '体股东配售新股。根据本次实际配股认购情况及深圳发展银行和主承销商海通证\n'
        '券有限公司签定的配股承销协议，本次实际配股总数为393,975,057股，每股配\n'
        '股价 8.00 元，实收配股资金 3,151,800,456 元，扣除与本次配股相关的费用\n'
        '61,915,333.08 元，实际配股募集资金为 3,089,885,122.92 元，于 2000 年 11\n'
        '月 24 日全部到位并经深圳鹏城会计师事务所（深鹏所验字[2000]163 号验资报\n'
        '告）验证。\n'
        '二、 截至2006年12月31日前次募集资金的实际使用情况\n'
        '根据配股说明书承诺的募集资金使用计划，截至2006年12月31日止，前\n'
        '次募集资金全部用于充实本行资本金和拓展分支机构。前次募集资金到位后，增\n'
        '加了本行的股本及资本公积金共计3,089,885,122.92元，充实了本行的资本金。\n'
        '配股说明书中承诺的拓展分支机构情况及其相关的营运资金投入情况和实\n'
        '际情况比较如下：\n'
        '1、配股说明书承诺的项目和实际营运投入情况比较：（见下表及说明）配股说明书承诺的项目和实际营运投入情况比较表\n'
        '金额单位：人民币元\n'
        '配股说明书承诺 实际投入营运资金\n'
        '项目 计划投入 2000年投入 2001年投入 2002年投入 合计\n'
        '1、 拓展分支机构，\n'
        '拨付新设机构营运资金\n'
        '① 北京分行 495,000,000.00 200,000,000.00 295,000,000.00 - 495,000,000.00\n'
        '② 大连分行 440,000,000.00 100,000,000.00 340,000,000.00 - 440,000,000.00\n'
        '③ 重庆分行 500,000,000.00 100,000,000.00 400,000,000.00 - 500,000,000.00\n'
        '④ 南京分行 430,000,000.00 100,000,000.00 330,000,000.00 - 430,000,000.00\n'
        '⑤ 青岛分行 500,000,000.00 - 100,159,277.60 399,840,722.40 500,000,000.00\n'
        '小计 2,365,000,000.00 500,000,000.00 1,465,159,277.60 399,840,722.40 2,365,000,000.00\n'
        '2、充实资本金及营运资金\n'
        '① 总行 215,000,000.00 224,885,122.92 - - 224,885,122.92\n'
        '② 广州分行 300,000,000.00 100,000,000.00 200,000,000.00 - 300,000,000.00\n'
        '③ 上海分行 200,000,000.00 100,000,000.00 100,000,000.00 - 200,000,000.00\n'
        '小计 715,000,000.00 424,885,122.92 300,000,000.00 - 724,885,122.92\n'
        '合计 3,080,000,000.00 924,885,122.92 1,765,159,277.60 399,840,722.40 3,089,885,122.92\n'
        '注：截至2002年12月31日，前次募股资金已按配股说明书承诺的项目及用途全部投入使用完毕，截至2006年12月31日，前次募股资金较2002年12\n'
        '月31日的使用情况没有发生变化。上表所列表明，截至2006年12月31日，本行前次募集资金已按配股说明\n'
        '书承诺，全部用于充实资本金；实际募集资金大于计划使用资金的差额\n'
        '9,885,122.92 元，用于补充总行资本金。前次募集资金在未拨付上述分支行营\n'
        '运资金前，用作充实总行资本金用途。\n'
        '本行配股说明书中承诺的拓展分支机构情况及其相关的营运资金投入事项\n'
        '已全部完成。\n'
        '2、项目实际完成程度及效益情况\n'
        '北京、大连、重庆、广州及上海分行在配股前已开业，青岛及南京分行在\n'
        '筹建阶段，经人民银行批准，南京分行于 2000 年 11 月正式营业，青岛分行于\n'
        '2002年3月正式营业（2001年拨付筹办资金100,159,277.60元）。\n'
        '本行未在2000年度的配股说明书中进行专项的盈利预测。募集资金投入各\n'
        '分行及补充总行营运资金所产生直接效益亦无法单独核算列示。\n'
        '本次配股募集资金3,089,885,122.92元，全部用作充实资本金，提高了本\n'
        '行资本充足率，占2006年12月31日本行净资产的48%。\n'
        '本行前次募集资金对于本行前次募集资金后的生存与发展以及效益方面有\n'
        '直接和关键的作用。\n'
        '3、募集资金实际使用情况和本行其他信息披露文件披露内容比较\n'
        '2000 年度配股事项完成后，本行已在 2000 年 12 月 6 日在《中国证券报》\n'
        '及《证券时报》发布公告，本行的2000年至2006年年度报告及其他定期报告中\n'
        '关于前次募集资金的信息披露和实际使用情况相符。\n'
        '特此报告。\n'
        '深圳发展银行股份有限公司董事会\n'
        '2007年6月1日',
        [(23, 28), (30, 35)]),
}


def without_lines(text: str, ranges: list) -> str:
    lines = text.split("\n")
    return "\n".join(line for i, line in enumerate(lines) if not any(lo <= i < hi for lo, hi in ranges))


def test_remove_table_text_data_juicer_cases():
    for name, (text, removed) in TABLE_CASES.items():
        assert run("remove_table_text_mapper", [text]) == [without_lines(text, removed)], name


def test_remove_table_text_real_text():
    # the head of /usr/share/i18n/SUPPORTED: rows of two single-space separated cells; the first line has no
    # '\n' before it, so it is not part of the table
    head = "aa_DJ.UTF-8 UTF-8\naa_DJ ISO-8859-1\naa_ER UTF-8\naa_ER@saaho UTF-8\naa_ET UTF-8\naf_ZA.UTF-8 UTF-8\n"
    assert run("remove_table_text_mapper", [head]) == ["aa_DJ.UTF-8 UTF-8\n"]
    assert run("remove_table_text_mapper", [head], min_col=3) == [head]  # 2-column tables are out of range
    # GPL-3's title lines are indented: a row starts with a non-space cell, so nothing goes
    title = "\n                    GNU GENERAL PUBLIC LICENSE\n                       Version 3, 29 June 2007\n"
    assert run("remove_table_text_mapper", [title]) == [title]


def test_remove_table_text_column_bounds():
    assert "greater than or equal to 2" in invalid("remove_table_text_mapper", min_col=1)
    assert "less than or equal to 20" in invalid("remove_table_text_mapper", max_col=21)
    three = "x\na b c\nd e f\nend"
    assert run("remove_table_text_mapper", [three], max_col=2) == [three]
    assert run("remove_table_text_mapper", [three], min_col=3, max_col=3) == ["x\nend"]


# -- replace_content_mapper -----------------------------------------------------------------------


def test_replace_content_data_juicer_cases():
    texts = ["这是一个干净的文本。Including Chinese and English.", "◆●■►▼▲▴∆▻▷❖♡□", "多个●■►▼这样的特殊字符可以►▼▲▴∆吗？",
             "未指定的●■☛₨➩►▼▲特殊字符会☻▷❖被删掉吗？？"]
    assert run("replace_content_mapper", texts, pattern="●■", repl="<SPEC>") == [
        texts[0], "◆<SPEC>►▼▲▴∆▻▷❖♡□", "多个<SPEC>►▼这样的特殊字符可以►▼▲▴∆吗？", "未指定的<SPEC>☛₨➩►▼▲特殊字符会☻▷❖被删掉吗？？"]
    digits = ["这是一个123。Including 456 and English."]
    for pattern in (r"\d+(?:,\d+)*", "\\d+(?:,\\d+)*"):
        assert run("replace_content_mapper", digits, pattern=pattern, repl="<DIGIT>") == [
            "这是一个<DIGIT>。Including <DIGIT> and English."]


def test_replace_content_real_text():
    # GPL-3's copyright line; patterns apply in order, each with its own replacement
    line = " Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>"
    assert run("replace_content_mapper", [line], pattern=[r"\(C\)", r"\d{4}", r"r'<https?://[^>]+>'"],
               repl=["©", "YEAR", "<URL>"]) == [" Copyright © YEAR Free Software Foundation, Inc. <URL>"]
    assert run("replace_content_mapper", [line], pattern=[r"\s+", "_+"], repl="_") == [
        "_Copyright_(C)_2007_Free_Software_Foundation,_Inc._<https://fsf.org/>"]
    # a zh_CN libc message and a `regex`-only class: \p{Han}
    assert run("replace_content_mapper", ["%s 是一个 64 位 ELF 文件。"], pattern=r"\p{Han}+", repl="<ZH>") == [
        "%s <ZH> 64 <ZH> ELF <ZH>。"]
    assert run("replace_content_mapper", ["a.\nb"], pattern="a.+", repl="x") == ["x"]  # DOTALL, as Data-Juicer
    assert run("replace_content_mapper", [line]) == [line]  # no pattern: nothing to do


def test_replace_content_validation():
    assert "not a valid regular expression" in invalid("replace_content_mapper", pattern=["a", "(b"])
    assert "2 patterns but 1 replacements" in invalid("replace_content_mapper", pattern=["a", "b"], repl=["x"])
    assert "does not fit pattern" in invalid("replace_content_mapper", pattern="a", repl=r"\1")
    assert run("replace_content_mapper", ["ab"], pattern="(a)(b)", repl=[r"\2\1", "unused"]) == ["ba"]


# -- sentence_split_mapper ------------------------------------------------------------------------

SPLIT_CASES = {
    "en": ("Smithfield employs 3,700 people at its plant in Sioux Falls, South Dakota. The plant slaughters "
           "19,500 pigs a day — 5 percent of U.S. pork.",
           "Smithfield employs 3,700 people at its plant in Sioux Falls, South Dakota.\nThe plant slaughters "
           "19,500 pigs a day — 5 percent of U.S. pork."),
    "fr": ("Smithfield emploie 3,700 personnes dans son usine de Sioux Falls, dans le Dakota du Sud. L'usine "
           "abat 19 500 porcs par jour, soit 5 % du porc américain.",
           "Smithfield emploie 3,700 personnes dans son usine de Sioux Falls, dans le Dakota du Sud.\nL'usine "
           "abat 19 500 porcs par jour, soit 5 % du porc américain."),
    "pt": ("A Smithfield emprega 3.700 pessoas em sua fábrica em Sioux Falls, Dakota do Sul. A fábrica abate "
           "19.500 porcos por dia – 5% da carne suína dos EUA.",
           "A Smithfield emprega 3.700 pessoas em sua fábrica em Sioux Falls, Dakota do Sul.\nA fábrica abate "
           "19.500 porcos por dia – 5% da carne suína dos EUA."),
    "es": ("Smithfield emplea a 3.700 personas en su planta de Sioux Falls, Dakota del Sur. La planta sacrifica "
           "19.500 cerdos al día, el 5 por ciento de la carne de cerdo de EE.",
           "Smithfield emplea a 3.700 personas en su planta de Sioux Falls, Dakota del Sur.\nLa planta sacrifica "
           "19.500 cerdos al día, el 5 por ciento de la carne de cerdo de EE."),
}

# /usr/share/common-licenses/GPL-3, lines 4-20
GPL3 = """ Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>
 Everyone is permitted to copy and distribute verbatim copies
 of this license document, but changing it is not allowed.

                            Preamble

  The GNU General Public License is a free, copyleft license for
software and other kinds of works.

  The licenses for most software and other practical works are designed
to take away your freedom to share and change the works.  By contrast,
the GNU General Public License is intended to guarantee your freedom to
share and change all versions of a program--to make sure it remains free
software for all its users.  We, the Free Software Foundation, use the
GNU General Public License for most of our software; it applies also to
any other work released this way by its authors.  You can apply it to
your programs, too.
"""


def test_sentence_split_data_juicer_cases():
    for lang, (text, target) in SPLIT_CASES.items():
        assert run("sentence_split_mapper", [text], lang=lang) == [target], lang


def test_sentence_split_real_text():
    # "Inc." is an abbreviation of the English model; a sentence keeps its inner line breaks and spacing, the
    # whitespace between sentences becomes one '\n' (the text's leading space stays with its first sentence)
    assert run("sentence_split_mapper", [GPL3, ""]) == ["\n".join([
        " Copyright (C) 2007 Free Software Foundation, Inc. <https://fsf.org/>\n Everyone is permitted to copy and "
        "distribute verbatim copies\n of this license document, but changing it is not allowed.",
        "Preamble\n\n  The GNU General Public License is a free, copyleft license for\nsoftware and other kinds of "
        "works.",
        "The licenses for most software and other practical works are designed\nto take away your freedom to share "
        "and change the works.",
        "By contrast,\nthe GNU General Public License is intended to guarantee your freedom to\nshare and change all "
        "versions of a program--to make sure it remains free\nsoftware for all its users.",
        "We, the Free Software Foundation, use the\nGNU General Public License for most of our software; it applies "
        "also to\nany other work released this way by its authors.",
        "You can apply it to\nyour programs, too."]), ""]
    assert "Input should be 'en', 'fr', 'pt' or 'es'" in invalid("sentence_split_mapper", lang="de")


def test_sentence_split_is_nltks_punkt():
    """Data-Juicer runs NLTK's PunktSentenceTokenizer on NLTK's pretrained parameters; NLTK's own tokenizer on
    the parameters raypress loads splits every text here the same way."""
    nltk_punkt = pytest.importorskip("nltk.tokenize.punkt")
    punkt = pytest.importorskip("punkt")
    from raypress.operators.text.sentence_split_mapper import PUNKT_MODELS

    for lang, (text, _) in SPLIT_CASES.items():
        model = punkt.load_model(PUNKT_MODELS[lang])
        params = nltk_punkt.PunktParameters()
        params.abbrev_types, params.collocations = set(model.abbrev_types), set(model.collocations)
        params.sent_starters = set(model.sent_starters)
        for word, flags in model.ortho_context.items():
            params.ortho_context[word] = flags
        reference = nltk_punkt.PunktSentenceTokenizer(params)
        for doc in (text, GPL3, CHANGELOG) if lang == "en" else (text,):
            assert run("sentence_split_mapper", [doc], lang=lang) == ["\n".join(reference.tokenize(doc))], lang


# -- text_chunk_mapper ----------------------------------------------------------------------------

CHUNK_TEXTS = ["Today is Sunday and it's a happy day!",
               "Sur la plateforme MT4, plusieurs manières d'accéder à \nces fonctionnalités sont conçues simultanément.",
               "欢迎来到阿里巴巴！"]
CHUNK_TEXTS_ONE_LINE = [CHUNK_TEXTS[0], CHUNK_TEXTS[1].replace("\n", ""), CHUNK_TEXTS[2]]


def chunks(texts: list, **params) -> list:
    cls = get_op("text_chunk_mapper")
    out = cls(cls.Params(**params)).chunk_batch(pa.table({"text": pa.array(texts, pa.string())}))
    return out.column("text").to_pylist()


def test_text_chunk_data_juicer_cases():
    assert chunks(CHUNK_TEXTS, split_pattern="\n") == [
        CHUNK_TEXTS[0], "Sur la plateforme MT4, plusieurs manières d'accéder à ",
        "ces fonctionnalités sont conçues simultanément.", CHUNK_TEXTS[2]]
    assert chunks(CHUNK_TEXTS_ONE_LINE, max_len=20, split_pattern=None) == [
        "Today is Sunday and ", "it's a happy day!", "Sur la plateforme MT", "4, plusieurs manière",
        "s d'accéder à ces fo", "nctionnalités sont c", "onçues simultanément", ".", CHUNK_TEXTS[2]]
    assert chunks(CHUNK_TEXTS_ONE_LINE, max_len=20, overlap_len=2) == [
        "Today is Sunday and ", "d it's a happy day!", "Sur la plateforme MT", "MT4, plusieurs maniè",
        "ières d'accéder à ce", "ces fonctionnalités ", "s sont conçues simul", "ultanément.", CHUNK_TEXTS[2]]
    assert chunks(CHUNK_TEXTS, max_len=20, overlap_len=2, split_pattern="\n") == [
        "Today is Sunday and ", "d it's a happy day!", "Sur la plateforme MT", "MT4, plusieurs maniè",
        "ières d'accéder à ", "ces fonctionnalités ", "s sont conçues simul", "ultanément.", CHUNK_TEXTS[2]]


def test_text_chunk_tokenizer_modes_are_refused():
    for tokenizer in ("Qwen/Qwen-7B-Chat", "gpt-4o", "qwen2.5-72b-instruct"):
        assert "leave tokenizer unset" in invalid("text_chunk_mapper", max_len=10, overlap_len=1, split_pattern=None,
                                                  tokenizer=tokenizer, trust_remote_code=True)
    assert "cannot both be null" in invalid("text_chunk_mapper", split_pattern=None)
    assert "must be less than max_len" in invalid("text_chunk_mapper", max_len=5, overlap_len=5)
    assert "not a valid regular expression" in invalid("text_chunk_mapper", split_pattern="(")


def test_text_chunk_real_text():
    head = GPL3.split("\n")[:3]  # the copyright line and the two-line permission
    copyright_block = "\n".join(head) + "\n"
    # cut at the last '\n' within 80 characters: each line a chunk, the last keeping its '\n'
    assert chunks([copyright_block], max_len=80, split_pattern="\n") == [head[0], head[1], head[2] + "\n"]
    # no separator within 40: a forced cut, the rest starting overlap_len characters before it
    assert chunks([head[1]], max_len=40, overlap_len=5) == [
        " Everyone is permitted to copy and distr", "distribute verbatim copies"]
    # split_pattern only: separators that are only whitespace are dropped, other chunks keep their spacing
    preamble = GPL3.split("\n\n", 1)[1]
    assert chunks([preamble]) == [
        "                            Preamble",
        "  The GNU General Public License is a free, copyleft license for\nsoftware and other kinds of works.",
        preamble.split("\n\n")[2]]
    # separators that are not blank are chunks too; GPL-3 puts two spaces after a full stop, one stays
    assert chunks([preamble.split("\n\n")[2]], split_pattern=r"\. ") == [
        "  The licenses for most software and other practical works are designed\nto take away your freedom to "
        "share and change the works", ". ",
        " By contrast,\nthe GNU General Public License is intended to guarantee your freedom to\nshare and change all "
        "versions of a program--to make sure it remains free\nsoftware for all its users", ". ",
        " We, the Free Software Foundation, use the\nGNU General Public License for most of our software; it applies "
        "also to\nany other work released this way by its authors", ". ",
        " You can apply it to\nyour programs, too.\n"]


def test_text_chunk_rows_and_ids():
    cls = get_op("text_chunk_mapper")
    assert cls.kind is OpKind.AGGREGATOR  # one row in, several out: not a 1:1 Mapper
    table = pa.table({"id": ["a", "b", "c", "d"], "text": ["x\n\ny", "z", "  \n\n ", None], "n": [1, 2, 3, 4]})
    out = cls(cls.Params()).chunk_batch(table).to_pylist()
    assert out == [{"id": "a#0", "text": "x", "n": 1}, {"id": "a#1", "text": "y", "n": 1},
                   {"id": "b", "text": "z", "n": 2}, {"id": "d", "text": None, "n": 4}]  # blank text: no chunk

    class Batches:  # what `apply` asks of a Ray Dataset, on one batch
        def __init__(self, batch):
            self.batch = batch

        def map_batches(self, fn, batch_format, batch_size, fn_kwargs):
            assert batch_format == "pyarrow"
            return Batches(fn(self.batch, **fn_kwargs))

    art = cls(cls.Params(max_len=2, split_pattern=None)).apply(Batches(table.slice(0, 2)), None)
    assert art.ds.batch.column("text").to_pylist() == ["x\n", "\ny", "z"]
    assert art.ds.batch.column("id").to_pylist() == ["a#0", "a#1", "b"]


def test_text_chunk_never_loops_on_an_empty_match_at_the_start():
    # Data-Juicer recurses forever here ('^' matches only at 0); raypress cuts the window whole
    assert chunks(["abcdef"], max_len=4, split_pattern="^", overlap_len=1) == ["abcd", "def"]
