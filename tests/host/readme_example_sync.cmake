# Fails when a code block of the documentation (README.md or docs/*.md)
# differs from the source file it copies. The page marks such a block with a
# line "<!-- path/from/source/root -->" right before the opening fence; the
# file is the copy that CI compiles and runs. Each file must have exactly one
# such block, in whichever page.
# Usage: cmake -DSOURCE_DIR=... -DFILES=a,b -P readme_example_sync.cmake
file(GLOB pages ${SOURCE_DIR}/docs/*.md)
list(PREPEND pages ${SOURCE_DIR}/README.md)
string(REPLACE "," ";" FILES "${FILES}")
foreach(path ${FILES})
  file(READ ${SOURCE_DIR}/${path} expected)
  set(marker "<!-- ${path} -->\n```")
  set(found "")
  foreach(page ${pages})
    file(READ ${page} text)
    string(FIND "${text}" "${marker}" start)
    if(start GREATER_EQUAL 0)
      if(found)
        message(FATAL_ERROR "${found} and ${page} both copy ${path}: keep one")
      endif()
      set(found ${page})
      set(doc "${text}")
      set(doc_start ${start})
    endif()
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "no page (README.md, docs/*.md) has a code block after the line "
                        "<!-- ${path} -->")
  endif()
  string(SUBSTRING "${doc}" ${doc_start} -1 rest)
  string(FIND "${rest}" "\n" first_newline)  # the end of the marker line
  math(EXPR after_marker "${first_newline} + 1")
  string(SUBSTRING "${rest}" ${after_marker} -1 rest)
  string(FIND "${rest}" "\n" fence_end)  # the end of the opening fence
  math(EXPR body "${fence_end} + 1")
  string(SUBSTRING "${rest}" ${body} -1 rest)
  string(FIND "${rest}" "\n```\n" end)
  if(end LESS 0)
    message(FATAL_ERROR "${found}: the block after <!-- ${path} --> is not closed")
  endif()
  math(EXPR end "${end} + 1")  # keep the last line's newline
  string(SUBSTRING "${rest}" 0 ${end} block)
  if(NOT block STREQUAL expected)
    message(FATAL_ERROR "${found}'s copy of ${path} differs from the file: copy the file "
                        "into it (the block after <!-- ${path} -->)")
  endif()
endforeach()
