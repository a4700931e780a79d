#!/usr/bin/env python3
"""Writes the table-driven Jinja interpreter tests (tests/unit/jinja_{whitespace,expression,
statement,filter,tests,method}_test.cc): each case is a template (plus variables) whose expected
output, or expected error, comes from Python jinja2 configured as transformers configures it.
Edit the cases here, then run

  python3 tools/golden/chat_template/jinja_unit_cases.py

and commit the regenerated test files. Needs jinja2 (no transformers).
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from golden_python import replica_compile  # noqa: E402  (same environment as the goldens)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
MSG = {"messages": [{"role": "user", "content": "hello world"}, {"role": "assistant", "content": "hi"}],
       "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": {
           "type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
           "required": ["location"]}}}]}

# file -> {test name -> [template or (template, variables)]}
CASES = {
 "whitespace": {
  "TrimBlocksAndLstripBlocks": [
   "a\n  {% if true %}\n    b\n  {% endif %}\nc\n", "{% for i in [1,2] %}\n  item {{ i }}\n{% endfor %}\n",
   "a  {% if true %}  b{% endif %}", "\t\t{% if true %}tab{% endif %}", "{% if true %}\n{% endif %}\n\nx"],
  "VariableTagsAreNotTrimmed": ["  {{ 'x' }}  \n  {% set y = 1 %}\n{{ y }}", "{{ 'a' }}\n{{ 'b' }}\n"],
  "MinusModifiersStripAllWhitespace": [
   "a\n  {%- if true %}\n    b\n  {%- endif %}\nc", "a\n  {% if true -%}\n    b\n  {% endif -%}\n  c",
   "{{- '  a  ' -}}   {{ 'b' }}", "line1\n\n\n{%- if true -%}\n\n\nline2\n\n{% endif %}", "{%- set x = 'a' -%}\n\n{{ x }}",
   "{%- for x in ['a','b'] -%}\n{{ x }}\n{%- endfor -%}", "x\u00a0\u00a0{%- if true %}nbsp{% endif %}"],
  "PlusModifiersKeepWhitespace": ["{%+ if true %}\n  x\n{%+ endif +%}\n y", "   {%+ if true %}x{% endif %}"],
  "Comments": ["{# comment #}\nline\n  {# indented comment #}\nafter", "x {#- c -#} y", "x\n{#- c #}\ny",
               "a{#\nmultiline\n#}b", "1{#", "{# never closed"],
  "RawBlocks": ["{% raw %}{{ not evaluated }}{% endraw %}", "a\n  {% raw %}\n  {{ x }}\n  {% endraw %}\nb",
                "a {%- raw -%} {{ x }} {%- endraw -%} b"],
  "NewlinesNormalizedAndOneTrailingNewlineDropped": [
   "text\r\nmore\r\n{% if true %}\r\nin\r\n{% endif %}\r\n", "{% if true %}yes{% endif %}\n\n",
   "{% if true %}yes{% endif %}\n", "old\rmac"],
  "MacroBodies": ["{% macro m(x) -%}\n  [{{ x }}]\n{%- endmacro %}\n{{ m(1) }}\n{{ m(2) }}"],
  "BracesInsideTags": ["{{ {'a': {'b': 1}} }}", "{{ {'a': {'b': 1}}}}", "{% set d = {'a': {'b': 'c'}} %}{{ d.a.b }}{{ d['a']['b'] }}"],
 },
 "expression": {
  "Literals": ["{{ 'it\\'s' }} {{ \"dq\" }} {{ 'a' 'b' }} {{ '\\u00e9\\x41\\n' }}", "{{ 1_000 }} {{ 0x10 }} {{ 0b11 }} {{ 0o17 }} {{ 1.5e3 }} {{ 1e3 }} {{ 2.50 }}",
               "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}", "{{ [1, 'a', [None]] }} {{ (1,) }} {{ () }} {{ (1, 2) }} {{ {'a': 1, 2: 'b'} }}"],
  "PythonPrinting": ["{{ 1.0 }} {{ 0.5 }} {{ 1e-5 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.1 + 0.2 }} {{ 1e100 }} {{ -0.0 }} {{ 123.456 }} {{ 1.5e-7 }}",
                     "{{ ['a', \"it's\", 'say \"hi\"', 'both \\' \"'] }}", "{{ ['\\n', '\\t', '\\\\', 'é', '日本', '😀'] }}",
                     "{{ {'k': [True, False, None, 1.5]} }}", "{{ 123456789012345678 }} {{ -5 }}"],
  "Arithmetic": ["{{ 7 // 2 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 4 / 2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 7 % -3 }}",
                 "{{ 1 + 2 * 3 - 4 / 2 }} {{ -2 ** 2 }} {{ (-2) ** 2 }} {{ 2 ** -1 }} {{ true + 1 }} {{ 1 + 1.5 }}",
                 "{{ 'ab' * 3 }} {{ [1] * 3 }} {{ 2 * 'x' }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'a' + 'b' }} {{ 'x' * 0 }}",
                 "{{ 'a' + 1 }}", "{{ 1 + none }}", "{{ [1] + (2,) }}", "{{ 1 / 0 }}", "{{ 1 // 0 }}", "{{ 1 % 0 }}", "{{ 'a' - 'b' }}",
                 "{{ '%s-%d|%05.2f|%x|%-4s|%r' % ('a', 3, 3.14159, 255, 'ab', 'q') }}", "{{ '%(a)s' % {'a': 1} }} {{ '%s' % 5 }} {{ '%d%%' % 50 }}"],
  "Concatenation": ["{{ 'a' ~ 1 ~ none ~ 1.5 ~ true }}", "{{ 'a' ~ undefined_name ~ 'b' }}", "{{ 'a' ~ 1 + 2 }} {{ 10 % 3 ~ 'x' }}"],
  "Comparisons": ["{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] == [1, 2] }} {{ (1, 2) == [1, 2] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }}",
                  "{{ {'a': 1} == {'a': 1.0} }} {{ none == none }} {{ x == y }} {{ x != 1 }} {{ [1, 2] < [1, 3] }} {{ 'B' < 'a' }}",
                  "{{ 1 < 'a' }}", "{{ none < 1 }}", "{{ x < 1 }}"],
  "Membership": ["{{ 'ell' in 'hello' }} {{ 1 in [1, 2] }} {{ 'a' in {'a': 1} }} {{ 3 not in [1, 2] }} {{ 'x' in undefined_thing }} {{ (1, 2) in [(1, 2)] }}",
                 "{{ 1 in 'abc' }}", "{{ 'a' in none }}", "{{ [1] in {} }}"],
  "Logic": ["{{ x or 'default' }} {{ 0 and 'x' }} {{ '' or [] }} {{ 1 and 2 }} {{ not 1 == 2 }} {{ not x }} {{ not [] }}",
            "{{ 'a' if true else 'b' }} {{ 'a' if 0 else 'b' if 0 else 'c' }} [{{ 'a' if false }}] {{ ('y' if false) is defined }}"],
  "AttributesAndItems": [("{{ messages[0].content }} {{ messages[0]['role'] }} {{ messages[-1].content }} {{ messages.0.role }}", MSG),
                         ("{{ messages[0].missing }}|{{ messages[0]['missing'] }}|{{ messages[5] }}|{{ messages[0].missing is defined }}", MSG),
                         ("{{ messages[0].items }}", MSG), ("{{ messages[0].missing.deeper }}", MSG), ("{{ messages[7].role }}", MSG),
                         "{{ x.y }}", "{{ none.attribute }}|{{ none.attribute is defined }}", "{{ none.method() }}", "{{ 'abc'.nope() }}",
                         "{{ [1, 2].__class__ }}", "{{ {'__x': 1}['__x'] }}", "{{ {'items': 1}['items'] }} {{ {'items': 1}.items() }}"],
  "Slices": ["{{ 'abc'[::-1] }} {{ [1, 2, 3][1:] }} {{ 'hello'[1:3] }} {{ [1, 2, 3, 4, 5][::2] }} {{ [1, 2, 3][5:] }} {{ (1, 2, 3)[::-1] }}",
             "{{ 'abc'[-2:] }} {{ 'abc'[:-1] }} {{ [1, 2, 3][::-2] }} {{ 'abcdef'[1:5:2] }} {{ 'héllo'[1:3] }} {{ 'héllo'[1] }} {{ 'abc'[-1] }}",
             "{{ [1, 2][::0] }}", ("{{ d[1:] }}", {"d": {"a": 1}}), ("{{ n[1:] }}", {"n": None})],
  "Tests": ["{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 1 is not none }} {{ 'a' is string }} {{ {} is mapping }}"],
  "UndefinedBehaviour": ["[{{ x }}] {{ x is defined }} {{ not x }} {{ x | default('d') }} {{ x | length }} {% for i in x %}never{% endfor %}",
                         "{{ x + 1 }}", "{{ x() }}", "{{ x[0] }}", "{{ -x }}", "{{ x | tojson }}"],
 },
 "statement": {
  "IfElifElse": ["{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", "{% if x %}a{% else %}b{% endif %}", "{% if 1, 2 %}tuple{% endif %}"],
  "ForLoopVariables": ["{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
                       "{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}", "{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{% endfor %}",
                       "{% for x in 'ab' %}{{ x }}{% endfor %} {% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}", "{% for x in [1] %}{{ loop }}{% endfor %}"],
  "ForFilterAndElse": ["{% for x in [1,2,3] if x > 1 %}{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}",
                       "{% for x in [] %}a{% else %}empty{% endfor %}", "{% for x in [1] if x > 5 %}a{% else %}filtered{% endfor %}"],
  "ForUnpacking": ["{% for a, b in {'x': 1, 'y': 2}.items() %}{{ a }}={{ b }};{% endfor %}", "{% for a, (b, c) in [(1, (2, 3))] %}{{ a }}{{ b }}{{ c }}{% endfor %}",
                   "{% for a, b in [(1, 2, 3)] %}{% endfor %}", "{% for a, b in [1] %}{% endfor %}"],
  "BreakAndContinue": ["{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
                       "{% for x in range(5) %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
                       "{% for x in [1,2] %}{% for y in [1,2] %}{% if y == 2 %}{% break %}{% endif %}{{ x }}{{ y }} {% endfor %}{% endfor %}"],
  "SetAndScoping": ["{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}", "{% for i in [1,2] %}{% set y = i %}{% endfor %}[{{ y }}]",
                    "{% set x = 1 %}{% for i in [1] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", "{% for i in [1,2] %}[{{ y }}]{% set y = i %}{% endfor %}",
                    "{% set a, b = 1, 2 %}{{ a }}{{ b }}", "{% set t = 1, 2 %}{{ t }}", "{{ x }}{% set x = 3 %}{{ x }}"],
  "BlockSet": ["{% set x %}hello {{ 1 }}{% endset %}[{{ x }}]", "{% set x | upper | replace('L', '_') %}hello{% endset %}[{{ x }}]"],
  "Namespace": ["{% set ns = namespace(a=1, b=[]) %}{% for i in [1,2] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns.missing }}|",
                "{% set ns = namespace({'k': 'v'}) %}{{ ns.k }} {{ ns }}", "{% set d = {} %}{% set d.x = 1 %}"],
  "Macros": ["{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 3, 4) }}|{{ m(1, c=5) }}|{{ m(b=7, a=6) }}",
             "{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
             "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, z=2) }}", "{% macro m(a, b=a * 2) %}{{ b }}{% endmacro %}{{ m(3) }}",
             "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}",
             "{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}", "{% macro m() %}{% set x = 5 %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}{{ x }}",
             "{% macro m() %}x{% endmacro %}{{ m().upper() }} {{ m() ~ 'y' }} {{ m() is string }}"],
  "CallBlocks": ["{% macro m(a) %}<{{ caller() }}-{{ a }}>{% endmacro %}{% call m(1) %}body{% endcall %}",
                 "{% macro m() %}{{ caller(5) }}{{ caller(6) }}{% endmacro %}{% call(x) m() %}[{{ x }}]{% endcall %}"],
  "FilterBlocks": ["{% filter upper %}abc {{ 'd' }}{% endfilter %}", "{% filter replace('a', 'b') | upper %}aaa{% endfilter %}"],
  "WithAndGeneration": ["{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "{% generation %}gen {{ 1 }}{% set inside = 1 %}{% endgeneration %}[{{ inside }}]",
                        "{% print 'p', 1 %}"],
  "LoopsOverMessages": [("{% for m in messages %}{{ m.role }}:{{ m.content }}|{% endfor %}", MSG),
                        ("{% for m in messages[::-1] %}{{ loop.index0 }}{{ m.role[0] }}{% endfor %}", MSG)],
 },
 "filter": {
  "Strings": ["{{ 'Hello World'|lower }} {{ 'hello world'|upper }} {{ 'hello world-foo (bar'|title }} {{ \"it's\"|title }} {{ 'aBC dEF'|capitalize }}",
              "{{ '  x  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'abc'|center(9) }}|{{ 'one two, three'|wordcount }}",
              "{{ '<>&\\'\"'|e }} {{ '<a>'|escape }} {{ '<a>'|safe }} {{ 42|e }}", "{{ 12|string }} {{ none|string }} {{ [1]|string }} {{ x|string }}|",
              "{{ x|lower }}|{{ x|title }}|{{ x|trim }}|{{ none|lower }}", "{{ '%s and %s'|format('a', 'b') }} {{ '%(x)s'|format(x=1) }}"],
  "Indent": ["{{ 'a\\nb'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\n'|indent('> ', true) }}"],
  "Numbers": ["{{ 3.0|int }} {{ '3'|int }} {{ 'x'|int }} {{ ' 42 '|int }} {{ '4_2'|int }} {{ '0x1A'|int(base=16) }} {{ '0x1A'|int(0, 0) }} {{ '3.9'|int }} {{ true|int }} {{ -3.99|int }} {{ none|int }} {{ 'x'|int(7) }}",
              "{{ '3.5'|float }} {{ ' 2.5 '|float }} {{ '1e3'|float }} {{ 'nan'|float }} {{ 'x'|float }} {{ 2|float }}",
              "{{ 1.5|round }} {{ 2.5|round }} {{ 2.567|round(2) }} {{ 1.55|round(1) }} {{ 1.45|round(1, 'floor') }} {{ 1.41|round(1, 'ceil') }} {{ 3|round }} {{ 3|round(1) }}",
              "{{ -3|abs }} {{ -3.5|abs }} {{ true|abs }}", "{{ x|int }}", "{{ 'a'|abs }}", "{{ 1|round(1, 'up') }}"],
  "ToJson": ["{{ {'a': [1, 2.0, None, True]}|tojson }}", "{{ {'a': 1, 'b': {'c': []}}|tojson(indent=2) }}", "{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}",
             "{{ 'é\\n\"\\\\/'|tojson }}", "{{ 'é😀'|tojson(ensure_ascii=true) }}", "{{ [1, 2]|tojson(separators=(',', ':')) }}", "{{ (1, 2)|tojson }}",
             "{{ {1: 2, none: 3, 1.5: 4, true: 5}|tojson }}", "{{ 1e100|tojson }} {{ 1e16|tojson }} {{ 0.1|tojson }} {{ 10|tojson }}",
             "{{ [1]|tojson(indent=0) }}", "{{ [1]|tojson(4) }}", "{{ {'a': {}}|tojson(indent='\\t') }}", "{{ x|tojson }}", "{{ namespace(a=1)|tojson }}", "{{ {'a': 1}.keys()|tojson }}",
             ("{{ tools|tojson }}", MSG), ("{{ tools[0]|tojson(indent=4) }}", MSG)],
  "Default": ["{{ x|default('d') }} {{ none|default('d') }} {{ none|default('d', true) }} {{ ''|d('e', true) }} {{ 0|d(5) }} {{ x|d }}|"],
  "Sequences": ["{{ [1, 2, 3]|first }} {{ []|first }}|{{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ {'a': 1}|first }} {{ 'abc'|length }} {{ {'a': 1}|count }} {{ x|length }}",
                "{{ 'ab'|list }} {{ {'a': 1}|list }} {{ x|list }} {{ (1, 2)|list }}", "{{ none|length }}", "{{ none|list }}",
                "{{ [1, 2]|join }} {{ [1, 2]|join(', ') }} {{ [{'a': 'x'}, {'a': 'y'}]|join(',', attribute='a') }} {{ ['a', none]|join('-') }}"],
  "Sorting": ["{{ [3, 1, 2]|sort }} {{ [3, 1, 2]|sort(reverse=true) }} {{ ['B', 'a', 'C']|sort }} {{ ['B', 'a', 'C']|sort(case_sensitive=true) }}",
              "{{ [{'a': 2}, {'a': 1}]|sort(attribute='a') }} {{ [{'a': 1, 'b': 2}, {'a': 1, 'b': 1}]|sort(attribute='a,b') }} {{ [3, 1]|sort(attribute='x') }}",
              "{{ {'b': 1, 'A': 2}|dictsort }} {{ {'b': 1, 'a': 0}|dictsort(by='value') }} {{ {'b': 1, 'a': 0}|dictsort(reverse=true) }}",
              "{{ ['a', 'A', 'b']|unique|list }} {{ [1, 1, 2]|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }}",
              "{{ [1, 2]|reverse|list }} {{ 'abc'|reverse }} {{ {'a': 1, 'b': 2}|reverse|list }}", "{{ [1, 'a']|sort }}"],
  "MapSelectReject": ["{{ [1, 2]|map('string')|join('-') }} {{ ['a', 'b']|map('upper')|list }} {{ [' a ']|map('trim')|list }} {{ ['a,b']|map('replace', ',', ';')|list }}",
                      "{{ [{'n': 'x'}, {'m': 1}]|map(attribute='n')|list }} {{ [{'n': 'x'}, {'m': 1}]|map(attribute='n', default='d')|list }} {{ [[1, 2]]|map(attribute='1')|list }}",
                      "{{ [1, 0, 2]|select|list }} {{ [1, 2, 3]|select('odd')|list }} {{ [1, 2, 3]|reject('odd')|list }} {{ [1, 5, 9]|select('>', 4)|list }}",
                      ("{{ messages|selectattr('role', 'equalto', 'user')|list }} {{ messages|rejectattr('role', '==', 'user')|map(attribute='content')|list }}", MSG),
                      "{{ [{'a': 1}, {'a': 0}, {}]|selectattr('a')|list }} {{ [{'a': {'b': 1}}]|selectattr('a.b', 'eq', 1)|list }}",
                      ("{{ messages|selectattr('role', 'eq', 'user')|length }}", MSG), ("{% if messages|selectattr('role', 'eq', 'nobody') %}generators are truthy{% endif %}", MSG),
                      "{{ x|select|list }} {{ x|map('upper')|list }}"],
  "Aggregates": ["{{ [1, 2, 3]|sum }} {{ [1.5, 2]|sum }} {{ [{'a': 1}, {'a': 2}]|sum(attribute='a') }} {{ [[1], [2]]|sum(start=[]) }}",
                 "{{ [3, 1, 2]|max }} {{ ['b', 'A']|max }} {{ []|max }}| {{ [3, 1, 2]|min }} {{ [{'a': 3}, {'a': 1}]|min(attribute='a') }}",
                 "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }}", "{{ ['a', 1]|sum }}"],
  "Items": ["{{ {'a': 1}|items|list }} {{ x|items|list }}", "{% for k, v in {'a': 1, 'b': [2]}|items %}{{ k }}={{ v }};{% endfor %}", "{{ none|items|list }}"],
  "Attr": [("{{ messages[0]|attr('role') }}|{{ messages|attr('nope') }}|{{ 'a'|attr('upper') is defined }}", MSG)],
 },
 "tests": {
  "Types": ["{{ x is string }}{{ 'a' is string }}{{ none is none }}{{ 1 is number }}{{ true is number }}{{ 1.5 is number }}{{ 'a' is number }}",
            "{{ true is integer }}{{ 1 is integer }}{{ 1.0 is float }}{{ 1 is float }}{{ true is boolean }}{{ 1 is boolean }}",
            "{{ {} is mapping }}{{ [] is mapping }}{{ 'a' is iterable }}{{ x is iterable }}{{ 1 is iterable }}{{ {} is iterable }}",
            "{{ 'a' is sequence }}{{ {} is sequence }}{{ [] is sequence }}{{ 1 is sequence }}{{ x is sequence }}{{ range is callable }}{{ 'a' is callable }}"],
  "Values": ["{{ 1 is true }}{{ true is true }}{{ false is false }}{{ 0 is false }}{{ x is defined }}{{ x is undefined }}",
             "{{ 3 is odd }}{{ 4 is even }}{{ 3.0 is odd }}{{ 4 is divisibleby 2 }}{{ 5 is divisibleby(2) }}",
             "{{ 1 is eq 1 }}{{ 1 is equalto 1 }}{{ 1 is == 2 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 2 is ge 2 }}{{ 2 is le 1 }}{{ 2 is greaterthan 1 }}{{ 1 is lessthan 2 }}",
             "{{ 'a' is in 'abc' }}{{ 1 is in [2] }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ 'Ab' is lower }}{{ '1' is lower }}",
             "{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}{{ none is sameas none }}{{ 1 is not sameas 2 }}{{ 'a' is escaped }}"],
  "Errors": ["{{ x is odd }}", "{{ 'a' is odd }}", "{{ 1 is nonexistent_test }}", "{{ 1 is eq }}"],
 },
 "method": {
  "StringSplitAndStrip": ["{{ 'a b  c'.split() }} {{ 'a,b'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b '.split(None, 1) }} {{ ' a b '.rsplit(None, 1) }}",
                          "{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x\\n\\n'.rstrip('\\n') }}|{{ '\\u3000x\\u00a0'.strip() }}|",
                          "{{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'a\\nb'.splitlines(true) }} {{ ''.split(',') }} {{ ''.split() }}",
                          "{{ 'a'.split('') }}", "{{ 'a'.strip(1) }}"],
  "StringSearch": ["{{ 'hello'.startswith('he') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('lo') }} {{ 'abc'.startswith('b', 1) }} {{ 'abc'.endswith('b', 0, 2) }}",
                   "{{ 'héllo'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.rfind('l') }} {{ 'héllo'.index('o') }} {{ 'hello'.count('l') }} {{ 'aaa'.count('') }}",
                   "{{ 'abc'.index('z') }}", "{{ 'a'.startswith(1) }}"],
  "StringCase": ["{{ 'héllo wörld'.upper() }} {{ 'ÉCOLE'.lower() }} {{ \"hello wORLD's x-y\".title() }} {{ 'hELLO'.capitalize() }} {{ 'AbC'.swapcase() }}",
                 "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ '  '.isspace() }} {{ ''.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }}"],
  "StringBuild": ["{{ '-'.join(['a', 'b']) }} {{ ''.join('abc') }} {{ 'aXbXc'.replace('X', '-') }} {{ 'aXbXc'.replace('X', '-', 1) }} {{ 'ab'.replace('', '|') }}",
                  "{{ 'hi {} {}'.format('x', 2) }} {{ '{0}{name}'.format(1, name='n') }} {{ '{:>5}|{:<4}|{:^6}|{:05d}|{:.2f}|{:,}'.format('a', 'b', 'c', 42, 3.14159, 1234567) }}",
                  "{{ 'ab'.center(6, '*') }} {{ 'ab'.ljust(4) }}| {{ 'ab'.rjust(4, '0') }} {{ '-5'.zfill(4) }} {{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }}",
                  "{{ 'prefix-x'.removeprefix('prefix-') }} {{ 'x.txt'.removesuffix('.txt') }}", "{{ ','.join([1, 2]) }}", "{{ '{}'.format() }}"],
  "DictMethods": [("{{ messages[0].get('role') }} {{ messages[0].get('nope', 'dflt') }} {{ messages[0].get('nope') }}", MSG),
                  "{{ {'a': 1}.keys() }} {{ {'a': 1}.values() }} {{ {'a': 1}.items() }} {{ {'a': 1}.items()|list }} {{ {'a': 1}.keys()|length }}",
                  "{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}{{ v }}{% endfor %} {{ 'a' in {'a': 1}.keys() }}",
                  "{{ {'a': 1}.update({'b': 2}) }}", "{{ {'a': 1}.pop('a') }}"],
  "ListMethods": ["{{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }} {{ (1, 2).index(1) }}", "{{ [1, 2].append(3) }}", "{% set l = [1] %}[{{ l.append }}]",
                  "{{ [1].index(5) }}"],
 },
}


def cpp_string(s):
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or o == 0x7F:
            out.append("\\%03o" % o)
        elif ch == "?":
            out.append("?")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def cpp_raw(s):
    if ")j\"" in s or "\r" in s or "\u00a0" in s or "\u3000" in s:
        return cpp_string(s)
    return 'R"j(' + s + ')j"'


def expectation(template, variables):
    try:
        return "output", replica_compile(template).render(**variables)
    except Exception as e:
        return "error", f"{type(e).__name__}: {e}"


HEADER = """// GENERATED by tools/golden/chat_template/jinja_unit_cases.py from Python jinja2 {version} configured
// as transformers configures it; edit the cases there and regenerate, do not edit by hand.
// {what}
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "tokenizer/chat_template/jinja_template.h"

namespace locus::jinja {{
namespace {{

// The rendered text, or "ERROR: <message>" so that failures and outputs compare alike.
std::string render(std::string_view source, std::string_view variables = "{{}}") {{
  auto compiled = Template::parse(source);
  if (!compiled) return "ERROR: " + compiled.error().message();
  auto out = compiled->render(nlohmann::ordered_json::parse(variables));
  if (!out) return "ERROR: " + out.error().message();
  return *out;
}}
"""

WHAT = {
    "whitespace": "Whitespace control: trim_blocks, lstrip_blocks, -/+ modifiers, comments, raw, newlines.",
    "expression": "Expressions: literals, Python printing, arithmetic, comparisons, `in`, logic, attribute/item access, slices, Undefined.",
    "statement": "Statements: if, for (loop variables, filters, else, unpacking, break/continue), set, namespace, macro, call, filter, with, generation.",
    "filter": "Filters: each builtin jinja2 filter chat templates use, plus transformers' tojson.",
    "tests": "Tests (`is ...`): types, values, comparisons, errors.",
    "method": "Python methods of str, dict and list called from templates.",
}

# Python errors whose message the C++ side reproduces word for word.
EXACT_ERRORS = ("UndefinedError", "TemplateError", "SecurityError")


def main():
    import jinja2
    for name, groups in CASES.items():
        lines = [HEADER.format(version=jinja2.__version__, what=WHAT[name])]
        count = 0
        for test, cases in groups.items():
            lines.append(f"\nTEST(Jinja{name.capitalize()}, {test}) {{")
            for case in cases:
                template, variables = (case, {}) if isinstance(case, str) else case
                kind, value = expectation(template, variables)
                call = f"render({cpp_raw(template)}" + (f", {cpp_raw(json.dumps(variables, ensure_ascii=False))})" if variables else ")")
                if "at 0x" in value:  # Python prints an address: only check that it renders
                    lines.append(f"  EXPECT_THAT({call}, testing::Not(testing::StartsWith(\"ERROR\")));")
                elif kind == "output":
                    lines.append(f"  EXPECT_EQ({call},\n            {cpp_string(value)});")
                else:
                    error_type, message = value.split(": ", 1)
                    detail = message if error_type in EXACT_ERRORS else ""
                    lines.append(f"  // Python: {value}".replace("\n", " ")[:200])
                    lines.append(f"  EXPECT_THAT({call}, testing::StartsWith({cpp_string('ERROR: ')}));")
                    if detail:
                        lines.append(f"  EXPECT_THAT({call}, testing::HasSubstr({cpp_string(detail)}));")
                count += 1
            lines.append("}")
        lines.append("\n}  // namespace\n}  // namespace locus::jinja\n")
        path = os.path.join(ROOT, "tests", "unit", f"jinja_{name}_test.cc")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines))
        print(f"{path}: {count} cases")
        if shutil.which("clang-format"):
            subprocess.run(["clang-format", "-i", path], check=True)


if __name__ == "__main__":
    main()
