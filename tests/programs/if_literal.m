function B = if_literal(A)
  % branches on a literal flag
  % test inputs: A=contraction(4)
  order = 3;
  if order == 2
    B = A^2;
  elseif order == 3
    B = A^3;
  else
    B = A;
  end
end
